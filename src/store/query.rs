//! Reading the run history, on a connection of its own (WAL lets it read
//! while the writer thread writes). Every result serializes with serde, for
//! `--format json`.
//!
//! These calls block on SQLite: from async code, make them before the
//! runtime gets busy or inside `spawn_blocking`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::detail::{ArtifactRow, AttemptDetail, PhaseDetail, RunDetail};
use super::error::StoreError;
use super::liveness::pid_alive;
use super::schema::{self, DB_FILE};
use super::status::{Outcome, RunStatus};

/// What `orch runs list` and `orch runs show` both say about a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunInfo {
    pub(crate) run_id: String,
    pub(crate) pipeline_name: String,
    pub(crate) pipeline_path: String,
    pub(crate) status: RunStatus,
    pub(crate) selection: String,
    pub(crate) pid: u32,
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: Option<u64>,
}

/// One line of `orch runs list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunSummary {
    #[serde(flatten)]
    pub(crate) run: RunInfo,
    /// Phases recorded (started or skipped).
    pub(crate) phases_total: u32,
    pub(crate) phases_succeeded: u32,
    /// Failed or timed out.
    pub(crate) phases_failed: u32,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct EventRow {
    /// Arrival order across the whole database (the rowid).
    pub(crate) id: i64,
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    pub(crate) seq: u64,
    pub(crate) ts_ms: u64,
    pub(crate) kind: String,
    /// The normalized event (`null` for `raw` and `stderr` lines).
    pub(crate) data: serde_json::Value,
    pub(crate) raw: String,
}

/// Some of a run's events, from [`Reader::events`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventPage {
    /// In arrival order.
    pub(crate) events: Vec<EventRow>,
    /// The cursor for the next call (its `after`): every event of the run
    /// (of the phase, when one was asked for) up to this id has been read.
    /// At least the last event's id; past it when the page is not full,
    /// so polling does not scan again what other phases wrote meanwhile.
    pub(crate) next: i64,
    /// The page holds `limit` events: more may follow at once.
    pub(crate) full: bool,
}

/// A read connection to `state.db`. `Send + Sync`: calls take turns on
/// the one connection.
pub struct Reader {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.path).finish()
    }
}

/// The columns of [`RunInfo`], in the order [`run_info`] reads them.
const RUN_COLUMNS: &str = "run_id, pipeline_name, pipeline_path, status, selection, pid,
                           started_ms, ended_ms";

/// A run's [`RUN_COLUMNS`], from the start of a row.
fn run_info(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunInfo> {
    Ok(RunInfo {
        run_id: r.get(0)?,
        pipeline_name: r.get(1)?,
        pipeline_path: r.get(2)?,
        status: r.get(3)?,
        selection: r.get(4)?,
        pid: r.get(5)?,
        started_ms: r.get(6)?,
        ended_ms: r.get(7)?,
    })
}

/// An attempt's events, newest first, through its spans (`?1` the
/// attempt's id): read from the end of its last span and stopped once the
/// tail is full, no sort (see the query-plan test). Newest is the last
/// recorded here: an import that filled a gap recorded the missing events
/// after later ones.
const ATTEMPT_TAIL: &str = "SELECT e.kind, e.data_json, e.raw
                            FROM attempt_spans s
                            CROSS JOIN events e ON e.rowid BETWEEN s.first_id AND s.last_id
                            WHERE s.attempt_id = ?1 AND e.attempt_id = ?1
                            ORDER BY s.first_id DESC, e.rowid DESC";

/// The stretches of rowids that hold a run's events and reach past a
/// cursor (`?1` run, `?2` cursor), in order: a seek in `event_spans`.
const EVENT_SPANS: &str = "SELECT first_id, last_id FROM event_spans
                           WHERE run_id = ?1 AND last_id > ?2
                           ORDER BY first_id";

/// A run's events in one stretch of rowids: `?1` run, above `?2`, up to
/// `?3`, `?4` the phase or NULL, at most `?5`. Read by rowid range, each
/// event's attempt by its id (see the query-plan test); `CROSS JOIN` keeps
/// SQLite from starting at the run's attempts, whose events are not in
/// arrival order.
const EVENTS_IN_SPAN: &str = "SELECT e.rowid, a.phase, a.agent, a.attempt, e.seq, e.ts_ms, e.kind,
                                     e.data_json, e.raw
                              FROM events e CROSS JOIN attempts a ON a.id = e.attempt_id
                              WHERE e.rowid > ?2 AND e.rowid <= ?3 AND a.run_id = ?1
                                AND (?4 IS NULL OR a.phase = ?4)
                              ORDER BY e.rowid
                              LIMIT ?5";

impl Reader {
    /// Open `<state_dir>/state.db` for reading, or `None` when there is no
    /// database there yet (nothing is created). An older schema is brought
    /// up to date; a newer one is refused.
    pub(crate) fn open(state_dir: &Path) -> Result<Option<Reader>, StoreError> {
        let path = state_dir.join(DB_FILE);
        if !path.is_file() {
            return Ok(None);
        }
        let conn = schema::open(&path, false)?;
        Ok(Some(Reader::new(conn, path)))
    }

    pub(super) fn new(conn: Connection, path: PathBuf) -> Reader {
        Reader {
            conn: Mutex::new(conn),
            path,
        }
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest runs first, at most `limit`.
    pub(crate) fn list_runs(&self, limit: usize) -> Result<Vec<RunSummary>, StoreError> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(&format!(
            "SELECT {RUN_COLUMNS},
                    (SELECT count(*) FROM phases p WHERE p.run_id = r.run_id),
                    (SELECT count(*) FROM phases p
                      WHERE p.run_id = r.run_id AND p.status = 'succeeded'),
                    (SELECT count(*) FROM phases p
                      WHERE p.run_id = r.run_id AND p.status IN ('failed', 'timed_out'))
             FROM runs r
             ORDER BY r.started_ms DESC, r.rowid DESC
             LIMIT ?1"
        ))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = st.query_map([limit], |r| {
            Ok(RunSummary {
                run: run_info(r)?,
                phases_total: r.get(8)?,
                phases_succeeded: r.get(9)?,
                phases_failed: r.get(10)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A run id from what a user typed: `latest` (the newest run), a full
    /// run id, or a prefix of exactly one. `None` when nothing matches; a
    /// prefix of several runs is [`StoreError::AmbiguousRun`].
    pub(crate) fn resolve_run(&self, spec: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn();
        if spec == "latest" {
            return Ok(conn
                .query_row(
                    "SELECT run_id FROM runs ORDER BY started_ms DESC, rowid DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?);
        }
        if spec.is_empty() {
            return Ok(None);
        }
        let exact: Option<String> = conn
            .query_row("SELECT run_id FROM runs WHERE run_id = ?1", [spec], |r| {
                r.get(0)
            })
            .optional()?;
        if exact.is_some() {
            return Ok(exact);
        }
        let mut st = conn.prepare_cached(
            "SELECT run_id FROM runs WHERE substr(run_id, 1, length(?1)) = ?1
             ORDER BY started_ms DESC, rowid DESC LIMIT 6",
        )?;
        let mut found: Vec<String> = st
            .query_map([spec], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if found.len() <= 1 {
            return Ok(found.pop());
        }
        let mut candidates = found
            .iter()
            .take(5)
            .map(|id| format!("`{id}`"))
            .collect::<Vec<_>>()
            .join(", ");
        if found.len() > 5 {
            candidates.push_str(", ...");
        }
        Err(StoreError::AmbiguousRun {
            spec: spec.to_string(),
            candidates,
        })
    }

    /// A run's status (`running`, `succeeded`, ...), or `None` for an
    /// unknown run.
    pub(crate) fn run_status(&self, run_id: &str) -> Result<Option<RunStatus>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row("SELECT status FROM runs WHERE run_id = ?1", [run_id], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// A run with its phases, attempts and artifacts: the rows the writer
    /// keeps of the records [`RunDetail::apply`] folds, read back as the
    /// same value.
    pub(crate) fn run(&self, run_id: &str) -> Result<Option<RunDetail>, StoreError> {
        let conn = self.conn();
        let run = conn
            .query_row(
                &format!("SELECT {RUN_COLUMNS}, digest, digests_json FROM runs WHERE run_id = ?1"),
                [run_id],
                |r| {
                    Ok(RunDetail::new(
                        run_info(r)?,
                        r.get(8)?,
                        json(&r.get::<_, String>(9)?),
                    ))
                },
            )
            .optional()?;
        let Some(mut run) = run else {
            return Ok(None);
        };

        let mut st = conn.prepare_cached(
            "SELECT phase, status, attempts, started_ms, ended_ms, required, reason FROM phases
             WHERE run_id = ?1 ORDER BY rowid",
        )?;
        run.phases = st
            .query_map([run_id], |r| {
                Ok(PhaseDetail {
                    name: r.get(0)?,
                    status: r.get(1)?,
                    attempts: r.get(2)?,
                    started_ms: r.get(3)?,
                    ended_ms: r.get(4)?,
                    required: r.get(5)?,
                    reason: r.get(6)?,
                    agents: Vec::new(),
                })
            })?
            .collect::<Result<_, _>>()?;

        // The event count is kept on the attempt's row (step 8).
        let mut st = conn.prepare_cached(
            "SELECT phase, agent, attempt, outcome, exit_code, reason, session_id, turns,
                    tokens_in, tokens_out, cost_usd, started_ms, ended_ms, argv_json, env_json,
                    prompt_json,
                    events, id
             FROM attempts a WHERE run_id = ?1 ORDER BY id",
        )?;
        let rows = st.query_map([run_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(17)?,
                AttemptDetail {
                    agent: r.get(1)?,
                    attempt: r.get(2)?,
                    status: r.get(3)?,
                    exit_code: r.get(4)?,
                    reason: r.get(5)?,
                    session_id: r.get(6)?,
                    turns: r.get(7)?,
                    tokens_in: r.get(8)?,
                    tokens_out: r.get(9)?,
                    cost_usd: r.get(10)?,
                    started_ms: r.get(11)?,
                    ended_ms: r.get(12)?,
                    argv: json(&r.get::<_, String>(13)?),
                    env: json(&r.get::<_, String>(14)?),
                    prompt: json(&r.get::<_, String>(15)?),
                    events: r.get(16)?,
                    output: Vec::new(),
                },
            ))
        })?;
        let mut tail = conn.prepare_cached(ATTEMPT_TAIL)?;
        for row in rows {
            let (phase, attempt_id, mut attempt) = row?;
            // Newest first, until the tail is full.
            let mut lines: Vec<String> = Vec::new();
            let mut ev = tail.query([attempt_id])?;
            while lines.len() < crate::events::TAIL_LINES
                && let Some(e) = ev.next()?
            {
                let (kind, data, raw): (String, String, String) = (e.get(0)?, e.get(1)?, e.get(2)?);
                lines.extend(
                    crate::events::readable_lines(&kind, &data, &raw)
                        .into_iter()
                        .rev(),
                );
            }
            lines.truncate(crate::events::TAIL_LINES);
            lines.reverse();
            attempt.output = lines;
            if let Some(p) = run.phases.iter_mut().find(|p| p.name == phase) {
                p.agents.push(attempt);
            }
        }

        let mut st = conn.prepare_cached(
            "SELECT phase, path, sha256 FROM artifacts WHERE run_id = ?1 ORDER BY rowid",
        )?;
        run.artifacts = st
            .query_map([run_id], |r| {
                Ok(ArtifactRow {
                    phase: r.get(0)?,
                    path: r.get(1)?,
                    sha256: r.get(2)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        run.reports = super::reports::list(&conn, run_id, &Default::default())?;
        run.learnings = super::reports::run_learnings(&conn, run_id)?;
        Ok(Some(run))
    }

    /// A run's reports that match `filter`, oldest first.
    pub(crate) fn reports(
        &self,
        run_id: &str,
        filter: &super::ReportFilter<'_>,
    ) -> Result<Vec<super::ReportRow>, StoreError> {
        super::reports::list(&self.conn(), run_id, filter)
    }

    /// The most recent `limit` learnings of every run, newest first.
    pub(crate) fn recent_learnings(
        &self,
        limit: usize,
    ) -> Result<Vec<super::LearningRow>, StoreError> {
        super::reports::recent_learnings(&self.conn(), limit)
    }

    /// Learnings of every run matching any word of `query`, best first
    /// (see [`super::Reports::search_learnings`]).
    pub(crate) fn search_learnings(
        &self,
        query: &str,
        limit: usize,
        min_quality: i64,
    ) -> Result<Vec<super::LearningRow>, StoreError> {
        super::reports::search_learnings(&self.conn(), query, limit, min_quality)
    }

    /// A run's events in arrival order: those with an id above `after` (0
    /// for all), only `phase`'s when given, at most `limit`. Page on, or
    /// poll for new events (`--follow`), by passing the page's `next` as
    /// `after`. Each call seeks the run's spans of rowids (`event_spans`)
    /// from the cursor and reads those rows in order, so it costs what it
    /// finds (with a phase, also what other phases wrote since), never the
    /// whole run again.
    pub(crate) fn events(
        &self,
        run_id: &str,
        phase: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<EventPage, StoreError> {
        let mut conn = self.conn();
        // One snapshot for the newest id, the spans and the rows: a later
        // commit only adds ids above the newest, so `next` can move there.
        let tx = conn.transaction()?;
        // `covered`: the highest id in a span. Rows above it were written by
        // a writer that keeps no spans (an older orch still running when
        // this one migrated the database): normally none. Finding out reads
        // every span, a row per stretch a run wrote alone: few.
        let (newest, covered): (i64, i64) = tx
            .prepare_cached(
                "SELECT (SELECT coalesce(max(rowid), 0) FROM events),
                        (SELECT coalesce(max(last_id), 0) FROM event_spans)",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mut spans: Vec<(i64, i64)> = tx
            .prepare_cached(EVENT_SPANS)?
            .query_map(params![run_id, after], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        if newest > covered {
            spans.push((covered + 1, newest));
        }
        let mut events: Vec<EventRow> = Vec::new();
        let mut rows = tx.prepare_cached(EVENTS_IN_SPAN)?;
        for (first, last) in spans {
            let room = limit - events.len();
            if room == 0 {
                break;
            }
            let room = i64::try_from(room).unwrap_or(i64::MAX);
            let from = after.max(first - 1);
            let found = rows.query_map(params![run_id, from, last, phase, room], |r| {
                Ok(EventRow {
                    id: r.get(0)?,
                    phase: r.get(1)?,
                    agent: r.get(2)?,
                    attempt: r.get(3)?,
                    seq: r.get(4)?,
                    ts_ms: r.get(5)?,
                    kind: r.get(6)?,
                    data: json(&r.get::<_, String>(7)?),
                    raw: r.get(8)?,
                })
            })?;
            for row in found {
                events.push(row?);
            }
        }
        drop(rows);
        tx.commit()?;
        let full = events.len() >= limit;
        let next = if full {
            events.last().map_or(after, |e| e.id)
        } else {
            newest.max(after)
        };
        Ok(EventPage { events, next, full })
    }

    /// How many events a run has.
    pub fn event_count(&self, run_id: &str) -> Result<u64, StoreError> {
        let conn = self.conn();
        Ok(conn.query_row(
            "SELECT count(*) FROM event_spans s
             CROSS JOIN events e ON e.rowid BETWEEN s.first_id AND s.last_id
             WHERE s.run_id = ?1",
            [run_id],
            |r| r.get(0),
        )?)
    }

    /// The newest run of the pipeline file at `pipeline_path` (as recorded
    /// in `RunStarted`), for `--resume` without a run id.
    pub(crate) fn latest_run(&self, pipeline_path: &str) -> Result<Option<String>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT run_id FROM runs WHERE pipeline_path = ?1
                 ORDER BY started_ms DESC, rowid DESC LIMIT 1",
                [pipeline_path],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// The phases of a run that succeeded (what `--resume` skips), by name.
    pub(crate) fn succeeded_phases(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT phase FROM phases WHERE run_id = ?1 AND status = ?2 ORDER BY rowid",
        )?;
        let rows = st.query_map(params![run_id, Outcome::Succeeded.as_str()], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// A run's `(digest, digests_json)` as recorded, or `None` for an
    /// unknown run.
    pub(crate) fn run_digests(&self, run_id: &str) -> Result<Option<(String, String)>, StoreError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT digest, digests_json FROM runs WHERE run_id = ?1",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// The highest attempt number recorded for each `(phase, agent)` of a
    /// run. A resumed run numbers its new attempts after these: attempt
    /// numbers are never reused (their events would collide).
    pub(crate) fn attempt_counts(
        &self,
        run_id: &str,
    ) -> Result<HashMap<(String, String), u32>, StoreError> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT phase, agent, max(attempt) FROM attempts WHERE run_id = ?1
             GROUP BY phase, agent",
        )?;
        let rows = st.query_map([run_id], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every run still `running` whose orch process is gone becomes
    /// `interrupted`; its `running` phases and attempts become `cancelled`
    /// (ending at their last recorded event). Returns those runs' ids.
    /// Takes the write lock only when there is something to mark.
    pub(crate) fn mark_interrupted(&self) -> Result<Vec<String>, StoreError> {
        self.mark_where(|pid| !pid_alive(pid))
    }

    /// Every run still `running` becomes `interrupted`, as in
    /// [`Reader::mark_interrupted`]: for when no orch holds the state
    /// directory's run lock (see `RunLock`), so none of them is running,
    /// whatever process has their orch's number now.
    pub(crate) fn mark_all_interrupted(&self) -> Result<Vec<String>, StoreError> {
        self.mark_where(|_| true)
    }

    fn mark_where(&self, gone: impl Fn(u32) -> bool) -> Result<Vec<String>, StoreError> {
        let mut conn = self.conn();
        if !running_runs(&conn)?.iter().any(|(_, pid)| gone(*pid)) {
            return Ok(Vec::new());
        }
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Again under the lock: a resume may have taken a run over since.
        let dead: Vec<String> = running_runs(&tx)?
            .into_iter()
            .filter(|(_, pid)| gone(*pid))
            .map(|(id, _)| id)
            .collect();
        for run_id in &dead {
            tx.execute(
                "UPDATE attempts SET outcome = ?2,
                     ended_ms = coalesce(
                         (SELECT max(e.ts_ms) FROM attempt_spans s
                           CROSS JOIN events e ON e.rowid BETWEEN s.first_id AND s.last_id
                           WHERE s.attempt_id = attempts.id AND e.attempt_id = attempts.id),
                         started_ms)
                 WHERE run_id = ?1 AND outcome = 'running'",
                params![run_id, Outcome::Cancelled.as_str()],
            )?;
            tx.execute(
                "UPDATE phases SET status = ?2,
                     ended_ms = coalesce(
                         (SELECT max(a.ended_ms) FROM attempts a
                           WHERE a.run_id = phases.run_id AND a.phase = phases.phase),
                         started_ms)
                 WHERE run_id = ?1 AND status = 'running'",
                params![run_id, Outcome::Cancelled.as_str()],
            )?;
            tx.execute(
                "UPDATE runs SET status = ?2,
                     ended_ms = max(
                         started_ms,
                         coalesce((SELECT max(ended_ms) FROM phases WHERE run_id = ?1), 0),
                         coalesce((SELECT max(ended_ms) FROM attempts WHERE run_id = ?1), 0))
                 WHERE run_id = ?1 AND status = 'running'",
                params![run_id, RunStatus::Interrupted.as_str()],
            )?;
        }
        tx.commit()?;
        Ok(dead)
    }

    /// A run that another orch process, still alive, is running in this
    /// state directory, as `(run_id, pid)` (the newest if several), so a
    /// second `orch run` can refuse to start. This process's own runs do
    /// not count.
    #[cfg(test)]
    pub(crate) fn active_run(&self) -> Result<Option<(String, u32)>, StoreError> {
        Ok(live_runs_of_others(&self.conn(), None, std::process::id())?
            .into_iter()
            .next())
    }

    /// The names of a run's phases, in the order they started.
    pub(crate) fn phase_names(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut st =
            conn.prepare_cached("SELECT phase FROM phases WHERE run_id = ?1 ORDER BY rowid")?;
        let rows = st.query_map([run_id], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// Runs marked `running`, newest first, with their orch's pid.
fn running_runs(conn: &Connection) -> rusqlite::Result<Vec<(String, u32)>> {
    let mut st = conn.prepare_cached(
        "SELECT run_id, pid FROM runs WHERE status = 'running'
         ORDER BY started_ms DESC, rowid DESC",
    )?;
    let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Running runs whose orch is alive and is not `pid` (nor `run_id`):
/// another orch at work in this state directory.
pub(super) fn live_runs_of_others(
    conn: &Connection,
    run_id: Option<&str>,
    pid: u32,
) -> rusqlite::Result<Vec<(String, u32)>> {
    Ok(running_runs(conn)?
        .into_iter()
        .filter(|(id, p)| *p != pid && Some(id.as_str()) != run_id && pid_alive(*p))
        .collect())
}

/// Stored JSON text as a value (text that is not JSON stays a string).
fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixture::*;
    use crate::store::record::Record;
    use crate::store::status::Status;

    fn three_runs() -> Vec<Record> {
        let me = std::process::id();
        let mut v = whole_run(
            "20250101-aaa",
            me,
            1_000,
            &[("build", Outcome::Succeeded), ("test", Outcome::Succeeded)],
            3,
            Some(RunStatus::Succeeded),
        );
        v.extend(whole_run(
            "20250102-bbb",
            me,
            2_000,
            &[
                ("build", Outcome::Succeeded),
                ("test", Outcome::TimedOut),
                ("deploy", Outcome::Skipped),
            ],
            2,
            Some(RunStatus::Failed),
        ));
        v.extend(whole_run(
            "20250102-bcc",
            me,
            3_000,
            &[("build", Outcome::Failed)],
            1,
            Some(RunStatus::Failed),
        ));
        v
    }

    #[test]
    fn opening_a_missing_history_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Reader::open(dir.path()).unwrap().is_none());
        assert!(Reader::open(&dir.path().join("nowhere")).unwrap().is_none());
        assert!(!dir.path().join(DB_FILE).exists());
    }

    #[test]
    fn runs_are_listed_newest_first_with_phase_counts() {
        let (_dir, store) = store_with(three_runs());
        let runs = store.list_runs(10).unwrap();
        let ids: Vec<&str> = runs.iter().map(|r| r.run.run_id.as_str()).collect();
        assert_eq!(ids, ["20250102-bcc", "20250102-bbb", "20250101-aaa"]);
        let b = &runs[1];
        assert_eq!(b.run.status, RunStatus::Failed);
        assert_eq!(
            (b.phases_total, b.phases_succeeded, b.phases_failed),
            (3, 1, 1)
        );
        assert_eq!(b.run.pipeline_name, "demo");
        assert_eq!(b.run.started_ms, 2_000);
        assert!(b.run.ended_ms.unwrap() > 2_000);
        assert_eq!(store.list_runs(1).unwrap().len(), 1);
        // Serializes as plain fields, in this order (`orch runs list
        // --format json`).
        let ended = runs[2].run.ended_ms.unwrap();
        assert_eq!(
            serde_json::to_string(&runs[2]).unwrap(),
            format!(
                r#"{{"run_id":"20250101-aaa","pipeline_name":"demo","pipeline_path":"pipelines/demo.toml","status":"succeeded","selection":"all","pid":{},"started_ms":1000,"ended_ms":{ended},"phases_total":2,"phases_succeeded":2,"phases_failed":0}}"#,
                std::process::id()
            )
        );
    }

    #[test]
    fn run_ids_resolve_from_prefixes_and_latest() {
        let (_dir, store) = store_with(three_runs());
        let r = |s: &str| store.resolve_run(s);
        assert_eq!(r("20250101-aaa").unwrap().as_deref(), Some("20250101-aaa"));
        assert_eq!(r("20250101").unwrap().as_deref(), Some("20250101-aaa"));
        assert_eq!(r("20250102-bb").unwrap().as_deref(), Some("20250102-bbb"));
        assert_eq!(r("latest").unwrap().as_deref(), Some("20250102-bcc"));
        assert_eq!(r("2026").unwrap(), None);
        assert_eq!(r("").unwrap(), None);
        // `%` and `_` are not patterns.
        assert_eq!(r("2025010_").unwrap(), None);
        match r("20250102") {
            Err(StoreError::AmbiguousRun { candidates, .. }) => {
                assert_eq!(candidates, "`20250102-bcc`, `20250102-bbb`");
            }
            other => panic!("expected ambiguity, got {other:?}"),
        }
    }

    #[test]
    fn a_run_has_its_phases_attempts_and_artifacts() {
        let mut records = three_runs();
        records.push(artifact(
            "20250102-bbb",
            "build",
            "dist/app",
            &"ab".repeat(32),
        ));
        let (_dir, store) = store_with(records);
        assert_eq!(store.run("nope").unwrap(), None);
        let d = store.run("20250102-bbb").unwrap().unwrap();
        assert_eq!(d.run.status, RunStatus::Failed);
        assert_eq!(d.digest, digest_of("20250102-bbb"));
        assert_eq!(d.digests, serde_json::json!({"pipelines/demo.toml": "abc"}));
        let phases: Vec<(&str, &str, usize)> = d
            .phases
            .iter()
            .map(|p| (p.name.as_str(), p.status.as_str(), p.agents.len()))
            .collect();
        assert_eq!(
            phases,
            [
                ("build", "succeeded", 1),
                ("test", "timed_out", 1),
                ("deploy", "skipped", 0)
            ]
        );
        let a = &d.phases[1].agents[0];
        assert_eq!(a.agent, "a");
        assert_eq!(a.attempt, 1);
        assert_eq!(a.status, Status::TimedOut);
        assert_eq!(a.exit_code, Some(1));
        assert_eq!(a.reason.as_deref(), Some("exit status 1"));
        assert_eq!(a.session_id.as_deref(), Some("sess-1"));
        assert_eq!((a.turns, a.tokens_in, a.tokens_out), (2, 1200, 300));
        assert_eq!(a.cost_usd, Some(0.0125));
        assert_eq!(a.events, 2);
        assert_eq!(a.argv, serde_json::json!(["sh", "-c", "true"]));
        assert_eq!(a.env, serde_json::json!({"TOKEN": "<redacted>"}));
        assert_eq!(d.artifacts.len(), 1);
        assert_eq!(d.artifacts[0].path, "dist/app");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["phases"][1]["agents"][0]["status"], "timed_out");
        // The run's fields first, flat, in this order (`orch runs show
        // --format json`).
        let text = serde_json::to_string(&d).unwrap();
        let prefix = format!(
            r#"{{"run_id":"20250102-bbb","pipeline_name":"demo","pipeline_path":"pipelines/demo.toml","status":"failed","selection":"all","pid":{},"started_ms":2000,"ended_ms":{},"digest":"{}","digests":{{"pipelines/demo.toml":"abc"}},"phases":[{{"name":"build","#,
            std::process::id(),
            d.run.ended_ms.unwrap(),
            digest_of("20250102-bbb"),
        );
        assert!(text.starts_with(&prefix), "{text}");
        let suffix = format!(
            r#""artifacts":[{{"phase":"build","path":"dist/app","sha256":"{}"}}],"reports":[],"learnings":[]}}"#,
            "ab".repeat(32)
        );
        assert!(text.ends_with(&suffix), "{text}");
    }

    #[test]
    fn events_come_in_arrival_order_after_a_cursor() {
        let me = std::process::id();
        let mut records = whole_run("r1", me, 0, &[("p", Outcome::Succeeded)], 0, None);
        records.extend(whole_run(
            "r0",
            me,
            0,
            &[("x", Outcome::Succeeded)],
            4,
            None,
        ));
        let (c, b) = (attempt("r1", "p", "c", 1), attempt("r1", "q", "b", 1));
        records.push(phase_started("r1", "q", 1));
        records.push(b.start(1));
        // Two agents interleaved, in two phases.
        for seq in 0..5 {
            records.push(c.event(seq, 10 + seq));
            records.push(b.event(seq, 20 + seq));
        }
        records.insert(3, c.start(1));
        records.extend(whole_run(
            "r2",
            me,
            9,
            &[("p", Outcome::Succeeded)],
            4,
            None,
        ));
        let (_dir, store) = store_with(records);

        let all = store.events("r1", None, 0, 100).unwrap();
        assert!(!all.full);
        let all = all.events;
        let order: Vec<(&str, u64)> = all.iter().map(|e| (e.phase.as_str(), e.seq)).collect();
        assert_eq!(
            order,
            [
                ("p", 0),
                ("q", 0),
                ("p", 1),
                ("q", 1),
                ("p", 2),
                ("q", 2),
                ("p", 3),
                ("q", 3),
                ("p", 4),
                ("q", 4)
            ]
        );
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        assert_eq!(all[0].kind, "assistant_text");
        assert_eq!(all[0].data["text"], "line 0");
        assert!(all[0].raw.contains("\"type\":\"text\""));

        // Pages, by cursor: a full page stops at its last event.
        let first = store.events("r1", None, 0, 4).unwrap();
        assert_eq!(first.events, all[..4]);
        assert!(first.full);
        assert_eq!(first.next, all[3].id);
        let rest = store.events("r1", None, first.next, 100).unwrap();
        assert_eq!(rest.events, all[4..]);
        assert!(!rest.full);
        // A last id seen works as a cursor too.
        assert_eq!(
            store.events("r1", None, all[5].id, 100).unwrap().events,
            all[6..]
        );
        let after_all = store.events("r1", None, all[9].id, 100).unwrap();
        assert!(after_all.events.is_empty());
        assert!(store.events("r1", None, 0, 0).unwrap().events.is_empty());

        // One phase.
        let q = store.events("r1", Some("q"), 0, 100).unwrap().events;
        assert_eq!(q.len(), 5);
        assert!(q.iter().all(|e| e.phase == "q" && e.agent == "b"));
        assert!(
            store
                .events("r1", Some("zz"), 0, 100)
                .unwrap()
                .events
                .is_empty()
        );
        assert!(
            store
                .events("nope", None, 0, 100)
                .unwrap()
                .events
                .is_empty()
        );
        assert_eq!(store.event_count("r1").unwrap(), 10);
    }

    #[test]
    fn polling_from_the_cursor_reads_only_what_is_new() {
        let me = std::process::id();
        let (a, b) = (attempt("r1", "p", "a", 1), attempt("r1", "q", "b", 1));
        let (_dir, store) = store_with(whole_run("r1", me, 0, &[], 0, None));
        let w = store.writer();
        let send = |records: Vec<Record>| {
            send_all(&w, records);
            w.flush().unwrap();
        };
        send(vec![
            phase_started("r1", "p", 1),
            phase_started("r1", "q", 1),
            a.start(1),
            b.start(1),
            a.event(0, 2),
        ]);
        // `--follow` on phase p, and on the whole run.
        let page = store.events("r1", Some("p"), 0, 100).unwrap();
        assert_eq!(page.events.len(), 1);
        let (mut p_cursor, mut all_cursor) = (page.next, 0);
        let page = store.events("r1", None, all_cursor, 100).unwrap();
        assert_eq!(page.events.len(), 1);
        all_cursor = page.next;
        assert_eq!(all_cursor, page.events[0].id);

        // Phase q talks a lot; p's cursor moves past it without a match.
        send((0..50).map(|seq| b.event(seq, 3 + seq)).collect());
        let page = store.events("r1", Some("p"), p_cursor, 100).unwrap();
        assert!(page.events.is_empty());
        assert!(page.next > p_cursor, "nothing to read again next time");
        p_cursor = page.next;
        let page = store.events("r1", None, all_cursor, 100).unwrap();
        assert_eq!(page.events.len(), 50);
        all_cursor = page.next;

        // Another run writes in between (a resumed run's events are not
        // contiguous), then r1 again.
        send(whole_run(
            "r0",
            me,
            5,
            &[("x", Outcome::Succeeded)],
            20,
            None,
        ));
        send(vec![a.event(1, 60), b.event(50, 61)]);
        let page = store.events("r1", Some("p"), p_cursor, 100).unwrap();
        let seen: Vec<(String, u64)> = page
            .events
            .iter()
            .map(|e| (e.phase.clone(), e.seq))
            .collect();
        assert_eq!(seen, [("p".to_string(), 1)]);
        let page = store.events("r1", None, all_cursor, 100).unwrap();
        let seen: Vec<(&str, u64)> = page
            .events
            .iter()
            .map(|e| (e.phase.as_str(), e.seq))
            .collect();
        assert_eq!(seen, [("p", 1), ("q", 50)]);
        // Nothing new: the same cursor, nothing read.
        let again = store.events("r1", None, page.next, 100).unwrap();
        assert!(again.events.is_empty());
        assert_eq!(again.next, page.next);
    }

    /// What SQLite does with a page: a seek in `event_spans` to the run,
    /// then rowid ranges of `events`; no scan, no sort, whatever the cursor
    /// or the phase. An attempt's tail likewise, from its spans.
    #[test]
    fn an_events_page_seeks_spans_and_reads_rowid_ranges() {
        let (_dir, store) = store_with(three_runs());
        let conn = store.conn();
        let plan = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> Vec<String> {
            conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap()
                .query_map(params, |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(
            plan(EVENT_SPANS, params!["20250102-bbb", 3]),
            ["SEARCH event_spans USING PRIMARY KEY (run_id=?)"]
        );
        assert_eq!(
            plan(ATTEMPT_TAIL, params![1]),
            [
                "SEARCH s USING PRIMARY KEY (attempt_id=?)",
                "SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"
            ]
        );
        for phase in [None, Some("build")] {
            assert_eq!(
                plan(EVENTS_IN_SPAN, params!["20250102-bbb", 3, 9, phase, 10]),
                [
                    "SEARCH e USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)",
                    "SEARCH a USING INTEGER PRIMARY KEY (rowid=?)"
                ],
                "phase {phase:?}"
            );
        }
    }

    #[test]
    fn events_written_without_a_span_are_still_read() {
        // As an orch from before spans writes after this one migrated the
        // database: rows above every span.
        let (_dir, store) = store_with(three_runs());
        let run = "20250102-bbb";
        let before = store.events(run, None, 0, 1000).unwrap().events.len();
        {
            let conn = store.conn();
            conn.execute(
                "INSERT INTO events SELECT attempt_id, 999, ts_ms, kind, data_json, 'unspanned'
                 FROM events WHERE attempt_id IN (SELECT id FROM attempts WHERE run_id = ?1)
                 LIMIT 1",
                [run],
            )
            .unwrap();
        }
        let page = store.events(run, None, 0, 1000).unwrap();
        assert_eq!(page.events.len(), before + 1);
        assert_eq!(page.events.last().unwrap().raw, "unspanned");
        // And from a cursor past everything else (a --follow poll).
        let tail = store
            .events(run, None, page.events[before - 1].id, 1000)
            .unwrap();
        assert_eq!(tail.events.len(), 1);
        assert!(
            store
                .events("20250101-aaa", None, 0, 1000)
                .unwrap()
                .events
                .iter()
                .all(|e| e.raw != "unspanned")
        );
    }

    #[test]
    fn resume_queries() {
        let mut records = three_runs();
        // An older run of another pipeline.
        records.push(Record::RunStarted {
            run_id: "other".into(),
            pipeline_name: "x".into(),
            pipeline_path: "x.toml".into(),
            digest: "d".into(),
            digests_json: "{}".into(),
            selection: "phase:a".into(),
            pid: std::process::id(),
            started_ms: 99_999,
        });
        records.push(attempt("20250102-bbb", "test", "a", 3).finish(Outcome::Failed, 9));
        let (_dir, store) = store_with(records);
        assert_eq!(
            store.latest_run("pipelines/demo.toml").unwrap().as_deref(),
            Some("20250102-bcc")
        );
        assert_eq!(
            store.latest_run("x.toml").unwrap().as_deref(),
            Some("other")
        );
        assert_eq!(store.latest_run("y.toml").unwrap(), None);
        assert_eq!(
            store.succeeded_phases("20250101-aaa").unwrap(),
            ["build", "test"]
        );
        assert_eq!(store.succeeded_phases("20250102-bbb").unwrap(), ["build"]);
        assert!(store.succeeded_phases("nope").unwrap().is_empty());
        assert_eq!(
            store.run_digests("20250101-aaa").unwrap(),
            Some((
                digest_of("20250101-aaa"),
                r#"{"pipelines/demo.toml":"abc"}"#.to_string()
            ))
        );
        assert_eq!(store.run_digests("nope").unwrap(), None);
        let counts = store.attempt_counts("20250102-bbb").unwrap();
        assert_eq!(counts.len(), 2);
        assert_eq!(counts[&("build".to_string(), "a".to_string())], 1);
        assert_eq!(counts[&("test".to_string(), "a".to_string())], 3);
        assert!(store.attempt_counts("nope").unwrap().is_empty());
    }

    #[test]
    fn runs_of_dead_orch_processes_become_interrupted() {
        let dead = dead_pid();
        let mut records = whole_run(
            "killed",
            dead,
            1_000,
            &[("done", Outcome::Succeeded)],
            2,
            None,
        );
        let busy = attempt("killed", "busy", "a", 1);
        records.extend([
            phase_started("killed", "busy", 1_100),
            busy.start(1_100),
            busy.event(0, 1_150),
            busy.event(1, 1_175),
            attempt("killed", "busy", "b", 1).start(1_100),
        ]);
        // Still running, in this (live) process.
        records.extend(whole_run(
            "alive",
            std::process::id(),
            2_000,
            &[("p", Outcome::Succeeded)],
            1,
            None,
        ));
        records.push(phase_started("alive", "q", 2_100));
        let (_dir, store) = store_with(records);

        assert_eq!(store.mark_interrupted().unwrap(), ["killed"]);
        let d = store.run("killed").unwrap().unwrap();
        assert_eq!(d.run.status, RunStatus::Interrupted);
        assert_eq!(d.run.ended_ms, Some(1_175), "the last thing recorded");
        assert_eq!(d.phases[0].status, Status::Succeeded, "finished work stays");
        assert_eq!(d.phases[1].status, Status::Cancelled);
        assert_eq!(d.phases[1].ended_ms, Some(1_175));
        let agents: Vec<(&str, &str, Option<u64>, u64)> = d.phases[1]
            .agents
            .iter()
            .map(|a| (a.agent.as_str(), a.status.as_str(), a.ended_ms, a.events))
            .collect();
        assert_eq!(
            agents,
            [
                ("a", "cancelled", Some(1_175), 2),
                ("b", "cancelled", Some(1_100), 0)
            ]
        );
        assert_eq!(store.succeeded_phases("killed").unwrap(), ["done"]);
        assert_eq!(store.event_count("killed").unwrap(), 4, "no event lost");

        let alive = store.run("alive").unwrap().unwrap();
        assert_eq!(alive.run.status, RunStatus::Running);
        assert_eq!(alive.phases[1].status, Status::Running);

        // Nothing left to mark.
        assert!(store.mark_interrupted().unwrap().is_empty());
        // With no orch holding the state directory, even a run whose
        // number names a live process (pid 1, this one) was left behind.
        assert_eq!(store.mark_all_interrupted().unwrap(), ["alive"]);
    }

    #[test]
    fn the_active_run_is_another_live_process() {
        let (_dir, store) = store_with(vec![
            run_started("gone", dead_pid(), 1),
            run_started("mine", std::process::id(), 2),
        ]);
        // Ours does not count, the dead one is not active.
        assert_eq!(store.active_run().unwrap(), None);

        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = other.id();
        // Written directly: the writer would refuse a second live run.
        let conn = Connection::open(store.path()).unwrap();
        conn.execute(
            "INSERT INTO runs VALUES ('theirs', 'p', 'p.toml', 'd', '{}', 'all', ?1, 'running', 3, NULL)",
            [pid],
        )
        .unwrap();
        assert_eq!(
            store.active_run().unwrap(),
            Some(("theirs".to_string(), pid))
        );
        other.kill().unwrap();
        other.wait().unwrap();
        assert_eq!(store.active_run().unwrap(), None);
        let mut marked = store.mark_interrupted().unwrap();
        marked.sort();
        assert_eq!(marked, ["gone", "theirs"]);
    }
}

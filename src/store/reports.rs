//! What agents report through orch's MCP server: tasks, decisions,
//! blockers, milestones, findings, phase claims and verdicts, comments,
//! follow-ups, test health (the `reports` table), and learnings (their own
//! table, searched across runs with FTS5).
//!
//! Who writes: `orch run` alone, which serves every agent's tools itself;
//! each attempt's endpoint has its own [`Reports`] (its identity) over one
//! connection they share, next to the engine's writer thread (which writes
//! runs, phases, attempts, events and artifacts, never these tables). Each
//! write is one IMMEDIATE transaction committed before the tool replies, so
//! what an agent was told is recorded is on disk. Rows are only ever
//! appended.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;

use super::error::StoreError;
use super::schema::{self, DB_FILE};
use super::status::status_text;

/// What a report row is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub(crate) enum ReportKind {
    TaskStarted,
    TaskCompleted,
    Decision,
    Blocker,
    Milestone,
    Claim,
    Verdict,
    Finding,
    Comment,
    Followup,
    TestHealth,
}

status_text!(ReportKind, "report kind");

/// The attempt a server writes for: every row it appends carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reporter {
    pub run_id: String,
    pub phase: String,
    pub agent: String,
    pub attempt: u32,
}

/// One report as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ReportRow {
    pub(crate) id: i64,
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    pub(crate) ts_ms: u64,
    pub(crate) kind: ReportKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) task_id: Option<i64>,
    pub(crate) data: serde_json::Value,
}

/// One learning as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct LearningRow {
    pub(crate) id: i64,
    pub(crate) run_id: String,
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) ts_ms: u64,
    pub(crate) learning_type: String,
    pub(crate) pattern: String,
    pub(crate) context: String,
    pub(crate) applies_to: String,
    pub(crate) quality: i64,
}

/// A learning to add.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewLearning<'a> {
    pub(crate) learning_type: &'a str,
    pub(crate) pattern: &'a str,
    pub(crate) context: &'a str,
    pub(crate) applies_to: &'a str,
}

/// The quality score a learning starts with.
pub(crate) const START_QUALITY: i64 = 50;

/// Which reports to read.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReportFilter<'a> {
    pub(crate) kinds: &'a [ReportKind],
    pub(crate) phase: Option<&'a str>,
    pub(crate) agent: Option<&'a str>,
    pub(crate) since_ms: Option<u64>,
}

/// What one attempt reports, as `who`, over a connection to `state.db`
/// that every attempt's endpoint shares ([`Reports::sharing`]).
pub struct Reports {
    conn: Arc<Mutex<Connection>>,
    who: Reporter,
}

impl Reports {
    /// Open the run history of `state_dir` (which must exist: the engine
    /// made it) to write as `who`.
    pub fn open(state_dir: &Path, who: Reporter) -> Result<Reports, StoreError> {
        let conn = schema::open(&state_dir.join(DB_FILE), false)?;
        Ok(Reports {
            conn: Arc::new(Mutex::new(conn)),
            who,
        })
    }

    /// A history in memory, for tests.
    #[cfg(test)]
    #[doc(hidden)]
    pub(crate) fn in_memory(who: Reporter) -> Result<Reports, StoreError> {
        let mut conn = Connection::open_in_memory()?;
        schema::migrate(&mut conn, Path::new(":memory:"))?;
        Ok(Reports {
            conn: Arc::new(Mutex::new(conn)),
            who,
        })
    }

    /// Another reporter on the same connection.
    pub(crate) fn sharing(&self, who: Reporter) -> Reports {
        Reports {
            conn: Arc::clone(&self.conn),
            who,
        }
    }

    pub(crate) fn reporter(&self) -> &Reporter {
        &self.who
    }

    /// The shared connection, for one call.
    pub(super) fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append a report, committed when this returns; its id.
    pub(crate) fn append(
        &self,
        kind: ReportKind,
        task_id: Option<i64>,
        data: &serde_json::Value,
        ts_ms: u64,
    ) -> Result<i64, StoreError> {
        // One statement is its own transaction (it takes the write lock
        // as `BEGIN IMMEDIATE` would, and commits when it returns), and
        // the connection is held until its id is read.
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO reports (run_id, phase, agent, attempt, ts_ms, kind, task_id, data_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            self.who.run_id,
            self.who.phase,
            self.who.agent,
            self.who.attempt,
            ts_ms,
            kind,
            task_id,
            data.to_string()
        ])?;
        Ok(conn.last_insert_rowid())
    }

    /// A report of this run by id.
    pub(crate) fn report(&self, id: i64) -> Result<Option<ReportRow>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {REPORT_COLUMNS} FROM reports WHERE id = ?1 AND run_id = ?2"),
                params![id, self.who.run_id],
                report_row,
            )
            .optional()?)
    }

    /// This run's reports that match `filter`, oldest first.
    pub(crate) fn list(&self, filter: &ReportFilter<'_>) -> Result<Vec<ReportRow>, StoreError> {
        list(&self.conn(), &self.who.run_id, filter)
    }

    /// Add a learning at the starting quality; `Ok(None)` when one with
    /// the same words (whatever the case, spacing and punctuation) exists.
    pub(crate) fn add_learning(
        &self,
        l: &NewLearning<'_>,
        ts_ms: u64,
    ) -> Result<Option<i64>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx.execute(
            "INSERT INTO learnings (run_id, phase, agent, attempt, ts_ms, learning_type, pattern,
                                    context, applies_to, quality, normalized)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (normalized) DO NOTHING",
            params![
                self.who.run_id,
                self.who.phase,
                self.who.agent,
                self.who.attempt,
                ts_ms,
                l.learning_type,
                l.pattern,
                l.context,
                l.applies_to,
                START_QUALITY,
                normalize(l.pattern)
            ],
        )?;
        if inserted == 0 {
            return Ok(None);
        }
        let id = tx.last_insert_rowid();
        tx.execute(
            "INSERT INTO learnings_fts (rowid, pattern, context, applies_to)
             VALUES (?1, ?2, ?3, ?4)",
            params![id, l.pattern, l.context, l.applies_to],
        )?;
        tx.commit()?;
        Ok(Some(id))
    }

    /// Learnings of every run that match `query`, best first.
    pub(crate) fn search_learnings(
        &self,
        query: &str,
        limit: usize,
        min_quality: i64,
    ) -> Result<Vec<LearningRow>, StoreError> {
        search_learnings(&self.conn(), query, limit, min_quality)
    }

    /// The learnings this run added, oldest first.
    pub(crate) fn run_learnings(&self) -> Result<Vec<LearningRow>, StoreError> {
        run_learnings(&self.conn(), &self.who.run_id)
    }

    /// A phase of this run as the engine recorded it so far: its status
    /// (`None` before the engine's writer committed it) and its attempts.
    pub(crate) fn phase_record(&self, phase: &str) -> Result<PhaseRecord, StoreError> {
        let conn = self.conn();
        let status = conn
            .query_row(
                "SELECT status FROM phases WHERE run_id = ?1 AND phase = ?2",
                params![self.who.run_id, phase],
                |r| r.get(0),
            )
            .optional()?;
        let mut st = conn.prepare_cached(
            "SELECT agent, attempt, outcome, reason FROM attempts
             WHERE run_id = ?1 AND phase = ?2 ORDER BY rowid",
        )?;
        let attempts = st
            .query_map(params![self.who.run_id, phase], |r| {
                Ok(AttemptRecord {
                    agent: r.get(0)?,
                    attempt: r.get(1)?,
                    status: r.get(2)?,
                    reason: r.get(3)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(PhaseRecord { status, attempts })
    }

    /// This run's events matching `q`, in the order they arrived.
    pub(crate) fn events(&self, q: &EventQuery<'_>) -> Result<Vec<EventRecord>, StoreError> {
        let conn = self.conn();
        // Both read in rowid order (a run's spans are islands of its own
        // rows, in order); with a phase, agent or attempt named, through
        // those attempts' spans, not every row of the run.
        let named = q.phase.is_some() || q.agent.is_some() || q.attempt.is_some();
        let mut st = conn.prepare_cached(if named {
            // Each row once, even where an attempt's spans overlap (rows
            // planted in the database can make them).
            "SELECT a.phase, a.agent, a.attempt, e.seq, e.ts_ms, e.kind, e.data_json
             FROM events e
             CROSS JOIN attempts a ON a.id = e.attempt_id
             WHERE e.rowid IN (
                 SELECT f.rowid FROM attempts b
                 CROSS JOIN attempt_spans s ON s.attempt_id = b.id
                 CROSS JOIN events f ON f.rowid BETWEEN s.first_id AND s.last_id
                 WHERE b.run_id = ?1 AND (?2 IS NULL OR b.phase = ?2)
                   AND (?3 IS NULL OR b.agent = ?3) AND (?4 IS NULL OR b.attempt = ?4)
                   AND f.attempt_id = b.id)
               AND a.run_id = ?1 AND (?5 IS NULL OR e.kind = ?5)
             ORDER BY e.rowid LIMIT ?6 OFFSET ?7"
        } else {
            "SELECT a.phase, a.agent, a.attempt, e.seq, e.ts_ms, e.kind, e.data_json
             FROM event_spans s
             CROSS JOIN events e ON e.rowid BETWEEN s.first_id AND s.last_id
             CROSS JOIN attempts a ON a.id = e.attempt_id
             WHERE s.run_id = ?1 AND a.run_id = ?1 AND (?2 IS NULL OR a.phase = ?2)
               AND (?3 IS NULL OR a.agent = ?3) AND (?4 IS NULL OR a.attempt = ?4)
               AND (?5 IS NULL OR e.kind = ?5)
             ORDER BY s.first_id, e.rowid LIMIT ?6 OFFSET ?7"
        })?;
        let rows = st.query_map(
            params![
                self.who.run_id,
                q.phase,
                q.agent,
                q.attempt,
                q.kind,
                q.limit as i64,
                q.offset as i64
            ],
            |r| {
                let data: String = r.get(6)?;
                Ok(EventRecord {
                    phase: r.get(0)?,
                    agent: r.get(1)?,
                    attempt: r.get(2)?,
                    seq: r.get(3)?,
                    ts_ms: r.get(4)?,
                    kind: r.get(5)?,
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A phase as the engine recorded it, for `get_phase`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PhaseRecord {
    pub(crate) status: Option<super::status::Status>,
    pub(crate) attempts: Vec<AttemptRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct AttemptRecord {
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    pub(crate) status: super::status::Status,
    pub(crate) reason: Option<String>,
}

/// Which events to read.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventQuery<'a> {
    pub(crate) phase: Option<&'a str>,
    pub(crate) agent: Option<&'a str>,
    pub(crate) attempt: Option<u32>,
    pub(crate) kind: Option<&'a str>,
    pub(crate) limit: usize,
    pub(crate) offset: usize,
}

/// One event as the tools show it (without the raw line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct EventRecord {
    pub(crate) phase: String,
    pub(crate) agent: String,
    pub(crate) attempt: u32,
    pub(crate) seq: u64,
    pub(crate) ts_ms: u64,
    pub(crate) kind: String,
    pub(crate) data: serde_json::Value,
}

const REPORT_COLUMNS: &str = "id, phase, agent, attempt, ts_ms, kind, task_id, data_json";

fn report_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReportRow> {
    let data: String = r.get(7)?;
    Ok(ReportRow {
        id: r.get(0)?,
        phase: r.get(1)?,
        agent: r.get(2)?,
        attempt: r.get(3)?,
        ts_ms: r.get(4)?,
        kind: r.get(5)?,
        task_id: r.get(6)?,
        data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
    })
}

/// A run's reports matching `filter`, oldest first.
pub(super) fn list(
    conn: &Connection,
    run_id: &str,
    filter: &ReportFilter<'_>,
) -> Result<Vec<ReportRow>, StoreError> {
    let mut st = conn.prepare_cached(&format!(
        "SELECT {REPORT_COLUMNS} FROM reports
         WHERE run_id = ?1
           AND (?2 IS NULL OR phase = ?2)
           AND (?3 IS NULL OR agent = ?3)
           AND ts_ms >= ?4
         ORDER BY id"
    ))?;
    let rows = st.query_map(
        params![
            run_id,
            filter.phase,
            filter.agent,
            filter.since_ms.unwrap_or(0)
        ],
        report_row,
    )?;
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        if filter.kinds.is_empty() || filter.kinds.contains(&row.kind) {
            out.push(row);
        }
    }
    Ok(out)
}

/// The most recent `limit` learnings of every run, newest first.
pub(super) fn recent_learnings(
    conn: &Connection,
    limit: usize,
) -> Result<Vec<LearningRow>, StoreError> {
    let mut st = conn.prepare_cached(&format!(
        "SELECT {LEARNING_COLUMNS} FROM learnings l ORDER BY id DESC LIMIT ?1"
    ))?;
    let rows = st.query_map([limit as i64], learning_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The learnings a run added, oldest first.
pub(super) fn run_learnings(
    conn: &Connection,
    run_id: &str,
) -> Result<Vec<LearningRow>, StoreError> {
    let mut st = conn.prepare_cached(&format!(
        "SELECT {LEARNING_COLUMNS} FROM learnings l WHERE run_id = ?1 ORDER BY id"
    ))?;
    let rows = st.query_map([run_id], learning_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

const LEARNING_COLUMNS: &str = "l.id, l.run_id, l.phase, l.agent, l.ts_ms, l.learning_type,
                                l.pattern, l.context, l.applies_to, l.quality";

fn learning_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LearningRow> {
    Ok(LearningRow {
        id: r.get(0)?,
        run_id: r.get(1)?,
        phase: r.get(2)?,
        agent: r.get(3)?,
        ts_ms: r.get(4)?,
        learning_type: r.get(5)?,
        pattern: r.get(6)?,
        context: r.get(7)?,
        applies_to: r.get(8)?,
        quality: r.get(9)?,
    })
}

/// Learnings of every run matching any word of `query`, ranked by BM25
/// (the pattern weighs most, then the context, then what it applies to)
/// scaled by the quality score; at least `min_quality`, at most `limit`.
pub(super) fn search_learnings(
    conn: &Connection,
    query: &str,
    limit: usize,
    min_quality: i64,
) -> Result<Vec<LearningRow>, StoreError> {
    let Some(fts) = fts_query(query) else {
        return Ok(Vec::new());
    };
    // bm25() is lower for better matches (negative): scale it by quality.
    let mut st = conn.prepare_cached(&format!(
        "SELECT {LEARNING_COLUMNS}
         FROM learnings_fts f JOIN learnings l ON l.id = f.rowid
         WHERE learnings_fts MATCH ?1 AND l.quality >= ?2
         ORDER BY bm25(learnings_fts, 3.0, 1.0, 0.5) * (0.5 + l.quality / 100.0), l.id
         LIMIT ?3"
    ))?;
    let rows = st.query_map(params![fts, min_quality, limit as i64], learning_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// An FTS5 query that matches any of the words of `text` (each quoted, so
/// no character of it is FTS syntax); `None` when it has no word.
pub(super) fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(32)
        .map(|w| format!("\"{}\"", w.to_lowercase()))
        .collect();
    (!words.is_empty()).then(|| words.join(" OR "))
}

/// The words of `text`, lower case, one space apart: two learnings that
/// differ only in case, spacing or punctuation are the same learning.
pub(crate) fn normalize(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reports() -> Reports {
        Reports::in_memory(Reporter {
            run_id: "r1".into(),
            phase: "p".into(),
            agent: "a".into(),
            attempt: 1,
        })
        .unwrap()
    }

    fn learning(pattern: &str) -> NewLearning<'_> {
        NewLearning {
            learning_type: "gotcha",
            pattern,
            context: "",
            applies_to: "",
        }
    }

    #[test]
    fn a_report_is_stamped_with_its_attempt_and_read_back() {
        let r = reports();
        let id = r
            .append(ReportKind::Decision, None, &serde_json::json!({"x": 1}), 7)
            .unwrap();
        let row = r.report(id).unwrap().unwrap();
        assert_eq!(
            (
                row.phase.as_str(),
                row.agent.as_str(),
                row.attempt,
                row.ts_ms
            ),
            ("p", "a", 1, 7)
        );
        assert_eq!(row.kind, ReportKind::Decision);
        assert_eq!(row.data["x"], 1);
        let only_tasks = r
            .list(&ReportFilter {
                kinds: &[ReportKind::TaskStarted],
                ..Default::default()
            })
            .unwrap();
        assert!(only_tasks.is_empty());
        assert_eq!(r.list(&ReportFilter::default()).unwrap().len(), 1);
    }

    #[test]
    fn a_learning_that_differs_only_in_case_and_punctuation_is_a_duplicate() {
        let r = reports();
        assert!(
            r.add_learning(&learning("Run `cargo fmt` before clippy!"), 1)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            r.add_learning(&learning("run cargo   FMT before clippy"), 2)
                .unwrap(),
            None
        );
    }

    #[test]
    fn learnings_are_found_by_any_word_and_quotes_are_not_syntax() {
        let r = reports();
        r.add_learning(
            &learning("sqlite busy timeout must be set per connection"),
            1,
        )
        .unwrap();
        r.add_learning(&learning("tokio stdin cannot be cancelled"), 1)
            .unwrap();
        let found = r.search_learnings("busy \"timeout* OR", 10, 0).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].pattern.contains("busy timeout"));
        assert!(r.search_learnings("\"*)(", 10, 0).unwrap().is_empty());
        assert!(r.search_learnings("tokio", 10, 51).unwrap().is_empty());
    }
}

//! Moving runs between state directories (`orch state export` / `import`):
//! a CI job exports its run, the jobs after it and the final one import
//! what came before, so one run spread over many machines reads as one.
//!
//! Export copies one run's rows into a new database inside one read
//! transaction of the source: in WAL mode that is a consistent snapshot,
//! whatever a live writer does meanwhile (a copied `state.db` file could
//! miss what is still in the `-wal` file). The file is left in rollback
//! mode, one self-contained file.
//!
//! Import merges: rows are matched by their natural keys (run; run and
//! phase; attempt; event), so importing the same file twice, or a file
//! that holds runs already merged, changes nothing. Reports and learnings
//! get new ids (task references follow), matched by content (a report
//! here stands for one report of the file).

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::error::StoreError;
use super::schema::{self, DB_FILE};
use super::status::{RunStatus, Status};

/// What an export or import moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Moved {
    pub(crate) runs: u64,
    pub(crate) phases: u64,
    pub(crate) attempts: u64,
    pub(crate) events: u64,
    pub(crate) artifacts: u64,
    pub(crate) reports: u64,
    pub(crate) learnings: u64,
}

fn transfer_error(message: String) -> StoreError {
    StoreError::Transfer { message }
}

/// Write run `run_id` of `state_dir` to `out` (replaced if present).
pub(crate) fn export(state_dir: &Path, run_id: &str, out: &Path) -> Result<Moved, StoreError> {
    let src_path = state_dir.join(DB_FILE);
    if !src_path.exists() {
        return Err(StoreError::UnknownRun {
            spec: run_id.to_string(),
            path: src_path,
        });
    }
    // Built beside its destination, renamed into place when complete.
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| transfer_error(format!("cannot create `{}`: {e}", dir.display())))?;
    let tmp = tempfile::Builder::new()
        .prefix(".orch-export-")
        .suffix(".db")
        .tempfile_in(dir)
        .map_err(|e| transfer_error(format!("cannot write in `{}`: {e}", dir.display())))?;
    let tmp_path = tmp.path().to_path_buf();
    {
        // The new file gets the schema first (and rollback journaling, so
        // it is one file when closed).
        let dst = schema::open(&tmp_path, true)?;
        dst.execute_batch("PRAGMA journal_mode = DELETE")?;
    }
    let mut conn = schema::open(&src_path, false)?;
    conn.execute("ATTACH DATABASE ?1 AS dst", [tmp_path.to_string_lossy()])?;
    let mut moved = Moved::default();
    {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        let found: Option<i64> = tx
            .query_row("SELECT 1 FROM main.runs WHERE run_id = ?1", [run_id], |r| {
                r.get(0)
            })
            .optional()?;
        if found.is_none() {
            return Err(StoreError::UnknownRun {
                spec: run_id.to_string(),
                path: src_path,
            });
        }
        // In the order the foreign keys need.
        let copy = |table: &str, order: &str| {
            tx.execute(
                &format!(
                    "INSERT INTO dst.{table} SELECT * FROM main.{table} WHERE run_id = ?1 ORDER BY {order}"
                ),
                [run_id],
            )
            .map(|n| n as u64)
        };
        moved.runs = copy("runs", "rowid")?;
        moved.phases = copy("phases", "rowid")?;
        // Attempts keep their ids, so the events' `attempt_id` holds.
        moved.attempts = copy("attempts", "id")?;
        // The run's events are in its attempts' spans of rowids (and, from
        // an orch that kept no spans, above every span), each once.
        moved.events = tx.execute(
            "INSERT INTO dst.events
             SELECT * FROM main.events WHERE rowid IN (
                 SELECT e.rowid FROM main.attempts a
                 JOIN main.attempt_spans s ON s.attempt_id = a.id
                 CROSS JOIN main.events e ON e.rowid BETWEEN s.first_id AND s.last_id
                 WHERE a.run_id = ?1 AND e.attempt_id = a.id
                 UNION
                 SELECT rowid FROM main.events
                 WHERE rowid > (SELECT coalesce(max(last_id), 0) FROM main.attempt_spans)
                   AND attempt_id IN (SELECT id FROM main.attempts WHERE run_id = ?1))
             ORDER BY rowid",
            [run_id],
        )? as u64;
        moved.artifacts = copy("artifacts", "rowid")?;
        moved.reports = copy("reports", "id")?;
        moved.learnings = copy("learnings", "id")?;
        tx.execute(
            "INSERT INTO dst.event_spans (run_id, first_id, last_id)
             SELECT ?1, min(rowid), max(rowid) FROM dst.events HAVING count(*) > 0",
            [run_id],
        )?;
        tx.execute(
            "INSERT INTO dst.attempt_spans (attempt_id, first_id, last_id)
             SELECT attempt_id, min(rowid), max(rowid) FROM dst.events GROUP BY attempt_id",
            [],
        )?;
        tx.execute(
            "INSERT INTO dst.learnings_fts (rowid, pattern, context, applies_to)
             SELECT id, pattern, context, applies_to FROM dst.learnings",
            [],
        )?;
        tx.commit()?;
    }
    conn.execute("DETACH DATABASE dst", [])?;
    drop(conn);
    tmp.persist(out)
        .map_err(|e| transfer_error(format!("cannot write `{}`: {}", out.display(), e.error)))?;
    Ok(moved)
}

/// A run's status from two records of it: the worse wins.
fn combine(a: RunStatus, b: RunStatus) -> RunStatus {
    let rank = |s: RunStatus| match s {
        RunStatus::Succeeded => 0,
        RunStatus::Running => 1,
        RunStatus::Failed => 2,
        RunStatus::Interrupted => 3,
    };
    if rank(a) >= rank(b) { a } else { b }
}

/// `all`, or the union of `phase:` lists (`from:` counts as its own).
fn combine_selection(a: &str, b: &str) -> String {
    if a == "all" || b == "all" {
        return "all".into();
    }
    let mut parts: Vec<String> = Vec::new();
    for s in [a, b] {
        let (kind, list) = s.split_once(':').unwrap_or(("phase", s));
        for p in list.split(',').filter(|p| !p.is_empty()) {
            let item = if kind == "phase" {
                p.to_string()
            } else {
                format!("{kind}:{p}")
            };
            if !parts.contains(&item) {
                parts.push(item);
            }
        }
    }
    format!("phase:{}", parts.join(","))
}

/// Merge the runs of `file` (an export) into `state_dir`'s history; what
/// moved, and the runs the file holds.
pub(crate) fn import(state_dir: &Path, file: &Path) -> Result<(Moved, Vec<String>), StoreError> {
    if !file.is_file() {
        return Err(transfer_error(format!(
            "`{}` is not a file",
            file.display()
        )));
    }
    // Work on a copy: an export from an older orch is brought up to date
    // (never the file itself); one from a newer orch is refused.
    let scratch = tempfile::tempdir()
        .map_err(|e| transfer_error(format!("cannot make a scratch folder: {e}")))?;
    let copy = scratch.path().join("import.db");
    std::fs::copy(file, &copy)
        .map_err(|e| transfer_error(format!("cannot read `{}`: {e}", file.display())))?;
    {
        let c = schema::open(&copy, false).map_err(|e| match e {
            StoreError::Open { source, .. } => transfer_error(format!(
                "`{}` is not an orch state export: {source}",
                file.display()
            )),
            StoreError::TooNew { found, known, .. } => StoreError::TooNew {
                path: file.to_path_buf(),
                found,
                known,
            },
            other => other,
        })?;
        let is_orch: bool = c
            .query_row(
                "SELECT count(*) = 1 FROM sqlite_schema WHERE type = 'table' AND name = 'runs'",
                [],
                |r| r.get(0),
            )
            .unwrap_or(false);
        if !is_orch {
            return Err(transfer_error(format!(
                "`{}` is not an orch state export",
                file.display()
            )));
        }
    }
    // The store is created when missing, as `orch run` would.
    drop(super::Store::open(state_dir)?);
    let mut conn = schema::open(&state_dir.join(DB_FILE), true)?;
    conn.execute("ATTACH DATABASE ?1 AS src", [copy.to_string_lossy()])?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let moved = merge(&tx, file)?;
    let runs: Vec<String> = tx
        .prepare("SELECT run_id FROM src.runs ORDER BY started_ms")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    tx.commit()?;
    conn.execute("DETACH DATABASE src", [])?;
    Ok((moved, runs))
}

fn merge(tx: &Connection, file: &Path) -> Result<Moved, StoreError> {
    let mut moved = Moved::default();
    // A file is hostile input (an agent of an earlier CI job could have
    // written it): values of a type orch never writes would compare
    // equal to others (`'1'` to 1) or stop every later read of the run.
    let misshapen: Option<String> = tx
        .query_row(
            "SELECT 'attempt ' || quote(attempt) || ' of run ' || quote(run_id)
             FROM src.attempts
             WHERE typeof(id) != 'integer' OR typeof(run_id) != 'text'
                OR typeof(phase) != 'text' OR typeof(agent) != 'text'
                OR typeof(attempt) != 'integer' OR attempt < 1
                OR typeof(outcome) != 'text' OR typeof(argv_json) != 'text'
                OR typeof(env_json) != 'text' OR typeof(prompt_json) != 'text'
                OR typeof(turns) != 'integer' OR turns < 0
                OR typeof(tokens_in) != 'integer' OR tokens_in < 0
                OR typeof(tokens_out) != 'integer' OR tokens_out < 0
                OR typeof(exit_code) NOT IN ('integer', 'null')
                OR typeof(reason) NOT IN ('text', 'null')
                OR typeof(session_id) NOT IN ('text', 'null')
                OR typeof(cost_usd) NOT IN ('real', 'integer', 'null')
                OR typeof(started_ms) NOT IN ('integer', 'null') OR started_ms < 0
                OR typeof(ended_ms) NOT IN ('integer', 'null') OR ended_ms < 0
             UNION ALL
             SELECT 'run ' || quote(run_id) FROM src.runs
             WHERE typeof(run_id) != 'text' OR typeof(pipeline_name) != 'text'
                OR typeof(pipeline_path) != 'text' OR typeof(digest) != 'text'
                OR typeof(digests_json) != 'text' OR typeof(selection) != 'text'
                OR typeof(status) != 'text' OR typeof(pid) != 'integer'
                OR typeof(started_ms) != 'integer' OR started_ms < 0
                OR typeof(ended_ms) NOT IN ('integer', 'null') OR ended_ms < 0
             UNION ALL
             SELECT 'phase ' || quote(phase) || ' of run ' || quote(run_id) FROM src.phases
             WHERE typeof(run_id) != 'text' OR typeof(phase) != 'text'
                OR typeof(status) != 'text' OR typeof(attempts) != 'integer' OR attempts < 0
                OR typeof(required) != 'integer'
                OR typeof(reason) NOT IN ('text', 'null')
                OR typeof(started_ms) NOT IN ('integer', 'null') OR started_ms < 0
                OR typeof(ended_ms) NOT IN ('integer', 'null') OR ended_ms < 0
             UNION ALL
             SELECT 'artifact ' || quote(path) || ' of run ' || quote(run_id) FROM src.artifacts
             WHERE typeof(run_id) != 'text' OR typeof(phase) != 'text'
                OR typeof(path) != 'text' OR typeof(sha256) != 'text'
             UNION ALL
             SELECT 'event ' || quote(seq) || ' of attempt id ' || quote(attempt_id)
             FROM src.events
             WHERE typeof(attempt_id) != 'integer' OR typeof(seq) != 'integer' OR seq < 0
                OR typeof(ts_ms) != 'integer' OR typeof(kind) != 'text'
                OR typeof(data_json) != 'text' OR typeof(raw) != 'text'
             LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(what) = misshapen {
        return Err(transfer_error(format!(
            "`{}` holds {what} with values orch never writes: nothing was imported",
            file.display()
        )));
    }
    // Runs: new ones are added (a run still `running` in the file was cut
    // off on its machine: interrupted); a known one must come from the
    // same files, and takes the earliest start, the latest end, the worse
    // status and both selections.
    let runs: Vec<(String, String, String, String, u64, Option<u64>)> = tx
        .prepare("SELECT run_id, digest, status, selection, started_ms, ended_ms FROM src.runs")?
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })?
        .collect::<Result<_, _>>()?;
    for (run_id, digest, status, selection, started, ended) in runs {
        let status: RunStatus = status.parse().unwrap_or(RunStatus::Interrupted);
        let status = if status == RunStatus::Running {
            RunStatus::Interrupted
        } else {
            status
        };
        let here: Option<(String, String, String, u64, Option<u64>)> = tx
            .query_row(
                "SELECT digest, status, selection, started_ms, ended_ms FROM main.runs WHERE run_id = ?1",
                [&run_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .optional()?;
        match here {
            None => {
                tx.execute(
                    "INSERT INTO main.runs SELECT * FROM src.runs WHERE run_id = ?1",
                    [&run_id],
                )?;
                tx.execute(
                    "UPDATE main.runs SET status = ?2 WHERE run_id = ?1",
                    params![run_id, status],
                )?;
                moved.runs += 1;
            }
            Some((d, s, sel, st, en)) => {
                if d != digest {
                    return Err(transfer_error(format!(
                        "run `{run_id}` in `{}` was made from different files than the run `{run_id}` here",
                        file.display()
                    )));
                }
                let here_status: RunStatus = s.parse().unwrap_or(RunStatus::Interrupted);
                let new_status = combine(here_status, status);
                let new_sel = combine_selection(&sel, &selection);
                let new_start = st.min(started);
                let new_end = match (en, ended) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                let changed = tx.execute(
                    "UPDATE main.runs SET status = ?2, selection = ?3, started_ms = ?4, ended_ms = ?5
                     WHERE run_id = ?1 AND (status IS NOT ?2 OR selection IS NOT ?3
                        OR started_ms IS NOT ?4 OR ended_ms IS NOT ?5)",
                    params![run_id, new_status, new_sel, new_start, new_end],
                )?;
                moved.runs += changed as u64;
            }
        }
    }
    // Phases: a new one is added; a known one takes the file's record when
    // that one ended later (or the one here never ended).
    moved.phases = tx.execute(
        "INSERT INTO main.phases SELECT * FROM src.phases WHERE true
         ON CONFLICT (run_id, phase) DO UPDATE SET
             status = excluded.status, attempts = excluded.attempts,
             started_ms = excluded.started_ms, ended_ms = excluded.ended_ms,
             required = excluded.required, reason = excluded.reason
         WHERE excluded.ended_ms IS NOT NULL
           AND (main.phases.ended_ms IS NULL OR excluded.ended_ms > main.phases.ended_ms)",
        [],
    )? as u64;
    // An attempt known here by its number must be the same attempt (its
    // start and command): two histories that each resumed the run have
    // numbered different attempts alike, and merging them would mix their
    // events (round z6).
    let clash: Option<(String, String, String, u32)> = tx
        .query_row(
            "SELECT s.run_id, s.phase, s.agent, s.attempt
             FROM src.attempts s JOIN main.attempts m
               ON m.run_id = s.run_id AND m.phase = s.phase AND m.agent = s.agent
                  AND m.attempt = s.attempt
             WHERE s.started_ms IS NOT m.started_ms OR s.argv_json IS NOT m.argv_json
             LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    if let Some((run, phase, agent, n)) = clash {
        return Err(transfer_error(format!(
            "attempt {n} of `{phase}/{agent}` in run `{run}` is another attempt in `{}` than in this history (both resumed the run on their own?): nothing was imported",
            file.display()
        )));
    }
    // Attempts: ids are each database's own; a new attempt takes one here.
    moved.attempts = tx.execute(
        "INSERT INTO main.attempts (run_id, phase, agent, attempt, argv_json, env_json, outcome,
                                    exit_code, reason, session_id, turns, tokens_in,
                                    tokens_out, cost_usd, started_ms, ended_ms, prompt_json)
         SELECT run_id, phase, agent, attempt, argv_json, env_json, outcome, exit_code, reason,
                session_id, turns, tokens_in, tokens_out, cost_usd, started_ms, ended_ms,
                prompt_json
         FROM src.attempts WHERE true
         ON CONFLICT (run_id, phase, agent, attempt) DO UPDATE SET
             outcome = excluded.outcome, exit_code = excluded.exit_code,
             reason = excluded.reason, session_id = excluded.session_id,
             turns = excluded.turns, tokens_in = excluded.tokens_in,
             tokens_out = excluded.tokens_out, cost_usd = excluded.cost_usd,
             ended_ms = excluded.ended_ms
         WHERE main.attempts.outcome = 'running' AND excluded.outcome != 'running'",
        [],
    )? as u64;
    // Events: an event of an attempt known here is known by its number. A
    // file that holds an attempt twice, or numbers two events of an
    // attempt alike, is not one orch wrote.
    let twin: Option<(String, String, String, u32)> = tx
        .query_row(
            "SELECT run_id, phase, agent, attempt FROM src.attempts
             GROUP BY run_id, phase, agent, attempt HAVING count(*) > 1 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    if let Some((run, phase, agent, n)) = twin {
        return Err(transfer_error(format!(
            "`{}` holds attempt {n} of `{phase}/{agent}` in run `{run}` twice: nothing was imported",
            file.display()
        )));
    }
    let repeated: Option<(i64, i64)> = tx
        .query_row(
            "SELECT attempt_id, seq FROM src.events GROUP BY attempt_id, seq
             HAVING count(*) > 1 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    if let Some((attempt_id, seq)) = repeated {
        return Err(transfer_error(format!(
            "`{}` holds event {seq} of one attempt (id {attempt_id}) twice: nothing was imported",
            file.display()
        )));
    }
    // The numbers of the events here of the file's runs, read once
    // through their attempts' spans (events have no key of their own).
    tx.execute_batch(
        "DROP TABLE IF EXISTS temp.known_events;
         CREATE TEMP TABLE known_events (
             attempt_id INTEGER NOT NULL,
             seq        INTEGER NOT NULL,
             PRIMARY KEY (attempt_id, seq)
         ) WITHOUT ROWID;",
    )?;
    tx.execute(
        "INSERT OR IGNORE INTO temp.known_events (attempt_id, seq)
         SELECT e.attempt_id, e.seq
         FROM main.attempts m
         JOIN main.attempt_spans sp ON sp.attempt_id = m.id
         CROSS JOIN main.events e ON e.rowid BETWEEN sp.first_id AND sp.last_id
         WHERE m.run_id IN (SELECT run_id FROM src.attempts) AND e.attempt_id = m.id",
        [],
    )?;
    // New ones go in run by run, in order; the rowids they took make their
    // runs' and attempts' spans (SQLite may hand out any free rowid when
    // the largest is taken, so they are read back, not assumed).
    let mut added: Vec<(i64, i64)> = tx
        .prepare(
            "INSERT INTO main.events (attempt_id, seq, ts_ms, kind, data_json, raw)
             SELECT m.id, e.seq, e.ts_ms, e.kind, e.data_json, e.raw
             FROM src.events e
             JOIN src.attempts s ON s.id = e.attempt_id
             JOIN main.attempts m ON m.run_id = s.run_id AND m.phase = s.phase
                                 AND m.agent = s.agent AND m.attempt = s.attempt
             WHERE NOT EXISTS (SELECT 1 FROM temp.known_events k
                               WHERE k.attempt_id = m.id AND k.seq = e.seq)
             ORDER BY s.run_id, s.phase, s.agent, s.attempt, e.seq
             RETURNING rowid, attempt_id",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    tx.execute_batch("DROP TABLE temp.known_events")?;
    moved.events = added.len() as u64;
    added.sort_unstable();
    let runs_of: std::collections::HashMap<i64, String> = tx
        .prepare(
            "SELECT id, run_id FROM main.attempts WHERE run_id IN (SELECT run_id FROM src.attempts)",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut spans = super::spans::EventSpans::default();
    for (id, attempt_id) in added {
        if let Some(run_id) = runs_of.get(&attempt_id) {
            spans.add(run_id, attempt_id, id);
        }
    }
    spans.save(tx)?;
    moved.artifacts = tx.execute(
        "INSERT INTO main.artifacts SELECT * FROM src.artifacts WHERE true
         ON CONFLICT (run_id, phase, path) DO UPDATE SET sha256 = excluded.sha256
         WHERE main.artifacts.sha256 != excluded.sha256",
        [],
    )? as u64;
    moved.reports = merge_reports(tx)?;
    moved.learnings = merge_learnings(tx)?;
    Ok(moved)
}

/// Reports by content; a report's `task_id` (the id of the task report it
/// belongs to) is mapped to that task's id here.
///
/// Each report here matches one report of the file at most: a file
/// holding a report twice alike (an agent may say the same thing twice in
/// one millisecond) brings both, and importing it again brings neither.
/// The reports here of the file's runs are read once into a map by
/// content, so the merge is linear in the reports (a lookup per report in
/// SQL scanned every report of its run and kind: quadratic, 13 s for
/// 16,000).
fn merge_reports(tx: &Connection) -> Result<u64, StoreError> {
    /// What matches a report: everything but its id.
    type Content = (
        String,
        String,
        String,
        u32,
        u64,
        String,
        Option<i64>,
        String,
    );
    let row = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, Content)> {
        Ok((
            r.get(0)?,
            (
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ),
        ))
    };
    let cols = "id, run_id, phase, agent, attempt, ts_ms, kind, task_id, data_json";
    // The reports here of the runs the file holds, by content, each id
    // free to be matched once (oldest first).
    let mut here: HashMap<Content, std::collections::VecDeque<i64>> = HashMap::new();
    {
        let mut stmt = tx.prepare(&format!(
            "SELECT {cols} FROM main.reports
             WHERE run_id IN (SELECT DISTINCT run_id FROM src.reports) ORDER BY id"
        ))?;
        for r in stmt.query_map([], row)? {
            let (id, content) = r?;
            here.entry(content).or_default().push_back(id);
        }
    }
    let mut insert = tx.prepare(
        "INSERT INTO main.reports (run_id, phase, agent, attempt, ts_ms, kind, task_id, data_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    let mut read = tx.prepare(&format!("SELECT {cols} FROM src.reports ORDER BY id"))?;
    let mut ids: HashMap<i64, i64> = HashMap::new();
    let mut added = 0;
    for r in read.query_map([], row)? {
        let (id, mut content) = r?;
        content.6 = content.6.map(|t| ids.get(&t).copied().unwrap_or(t));
        let matched = here.get_mut(&content).and_then(|free| free.pop_front());
        let new_id = match matched {
            Some(existing) => existing,
            None => {
                let (run_id, phase, agent, attempt, ts, kind, task, data) = &content;
                insert.execute(params![run_id, phase, agent, attempt, ts, kind, task, data])?;
                added += 1;
                tx.last_insert_rowid()
            }
        };
        ids.insert(id, new_id);
    }
    Ok(added)
}

/// Learnings, one per normalized text (as when agents add them), each
/// added one indexed for search.
fn merge_learnings(tx: &Connection) -> Result<u64, StoreError> {
    let cols = "run_id, phase, agent, attempt, ts_ms, learning_type, pattern, context, applies_to, quality, normalized";
    let ids: Vec<i64> = tx
        .prepare("SELECT id FROM src.learnings ORDER BY id")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut added = 0;
    for id in ids {
        let n = tx.execute(
            &format!(
                "INSERT OR IGNORE INTO main.learnings ({cols}) SELECT {cols} FROM src.learnings WHERE id = ?1"
            ),
            [id],
        )?;
        if n == 1 {
            let new_id = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO main.learnings_fts (rowid, pattern, context, applies_to)
                 SELECT id, pattern, context, applies_to FROM main.learnings WHERE id = ?1",
                [new_id],
            )?;
            added += 1;
        }
    }
    Ok(added)
}

/// A phase the run did not record, with why (`orch state import
/// --pipeline`): it was skipped because a dependency did not succeed.
#[derive(Debug, Clone)]
pub(crate) struct Unrecorded {
    pub(crate) phase: String,
    pub(crate) required: bool,
    /// Skipped, or cancelled when nothing explains it.
    pub(crate) status: Status,
    pub(crate) reason: String,
}

/// After an import: record the phases no job ran (`unrecorded`, skipped),
/// and settle the run's status from its phases as one `orch run` would:
/// interrupted if a phase was cancelled or never ended, failed if a
/// required phase did not succeed, else succeeded.
pub(crate) fn complete(
    state_dir: &Path,
    run_id: &str,
    unrecorded: &[Unrecorded],
) -> Result<RunStatus, StoreError> {
    let mut conn = schema::open(&state_dir.join(DB_FILE), false)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let ended: Option<u64> = tx
        .query_row(
            "SELECT ended_ms FROM runs WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    for u in unrecorded {
        tx.execute(
            "INSERT INTO phases (run_id, phase, status, attempts, started_ms, ended_ms, required, reason)
             VALUES (?1, ?2, ?3, 0, NULL, ?4, ?5, ?6)
             ON CONFLICT (run_id, phase) DO NOTHING",
            params![run_id, u.phase, u.status, ended, u.required, u.reason],
        )?;
    }
    let phases: Vec<(Status, bool)> = tx
        .prepare("SELECT status, required FROM phases WHERE run_id = ?1")?
        .query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let status = if phases
        .iter()
        .any(|(s, _)| matches!(s, Status::Cancelled | Status::Running))
    {
        RunStatus::Interrupted
    } else if phases
        .iter()
        .any(|(s, required)| *required && *s != Status::Succeeded)
    {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    };
    tx.execute(
        "UPDATE runs SET status = ?2 WHERE run_id = ?1",
        params![run_id, status],
    )?;
    tx.commit()?;
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fixture::{store_with, whole_run};
    use crate::store::reports::NewLearning;
    use crate::store::{Outcome, ReportKind, Reporter, Reports};
    use serde_json::json;

    fn reports(state: &Path, run: &str) -> Reports {
        Reports::open(
            state,
            Reporter {
                run_id: run.into(),
                phase: "p".into(),
                agent: "a".into(),
                attempt: 1,
            },
        )
        .unwrap()
    }

    /// A run's reports as content, in order: each with the data of the
    /// task it belongs to (ids differ between histories, the task does
    /// not); and the history's ids of them.
    /// Kind, time, data and the task's data of each report.
    type Content = Vec<(String, u64, String, Option<String>)>;

    fn contents(state: &Path, run: &str) -> (Content, Vec<i64>) {
        let conn = Connection::open(state.join(DB_FILE)).unwrap();
        let rows: Vec<(i64, String, u64, String, Option<String>)> = conn
            .prepare(
                "SELECT r.id, r.kind, r.ts_ms, r.data_json, t.data_json
                 FROM reports r LEFT JOIN reports t ON t.id = r.task_id
                 WHERE r.run_id = ?1 ORDER BY r.id",
            )
            .unwrap()
            .query_map([run], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let ids = rows.iter().map(|r| r.0).collect();
        let content = rows
            .into_iter()
            .map(|(_, k, ts, d, t)| (k, ts, d, t))
            .collect();
        (content, ids)
    }

    /// A run's events as `orch runs show` reads them.
    fn events(state: &Path, run: &str) -> Vec<(String, String, u32, u64, String)> {
        let reader = crate::store::Reader::open(state).unwrap().unwrap();
        let page = reader.events(run, None, 0, 1000).unwrap();
        page.events
            .into_iter()
            .map(|e| (e.phase, e.agent, e.attempt, e.seq, e.raw))
            .collect()
    }

    /// Two histories that each resumed a run number their new attempts
    /// alike: importing one into the other is refused, not merged into
    /// the other's attempts (their events would mix).
    #[test]
    fn an_attempt_numbered_alike_elsewhere_is_not_merged() {
        let ok = [("p", Outcome::Succeeded)];
        let (src, _s) = store_with(whole_run("r1", 1, 0, &ok, 3, Some(RunStatus::Succeeded)));
        let (dst, _d) = store_with(whole_run("r1", 1, 50, &ok, 2, Some(RunStatus::Succeeded)));
        let file = src.path().join("r1.db");
        export(src.path(), "r1", &file).unwrap();
        let before = events(dst.path(), "r1");
        let err = import(dst.path(), &file).unwrap_err().to_string();
        assert!(
            err.contains("attempt 1 of `p/a` in run `r1` is another attempt"),
            "{err}"
        );
        assert_eq!(events(dst.path(), "r1"), before);
        // The same history again is still welcome.
        let again = src.path().join("again.db");
        export(src.path(), "r1", &again).unwrap();
        let (moved, _) = import(src.path(), &again).unwrap();
        assert_eq!(moved.events, 0);
    }

    /// Events carry no key of their own (schema step 8): an import adds
    /// the events whose number is not here yet, once, and refuses a file
    /// that numbers two events of an attempt alike.
    #[test]
    fn import_adds_only_events_not_here_yet_and_refuses_repeats() {
        let ok = [("p", Outcome::Succeeded)];
        let (src, _s) = store_with(whole_run("r1", 1, 0, &ok, 5, Some(RunStatus::Succeeded)));
        let (dst, _d) = store_with(whole_run("r1", 1, 0, &ok, 3, None));
        let file = src.path().join("r1.db");
        export(src.path(), "r1", &file).unwrap();
        let (moved, _) = import(dst.path(), &file).unwrap();
        assert_eq!(moved.events, 2);
        assert_eq!(events(dst.path(), "r1"), events(src.path(), "r1"));
        let (moved, _) = import(dst.path(), &file).unwrap();
        assert_eq!(moved.events, 0);
        assert_eq!(events(dst.path(), "r1").len(), 5);

        // A file with an event twice (forged, or not from orch).
        let (other, _o) = store_with(whole_run("r2", 1, 0, &ok, 3, Some(RunStatus::Succeeded)));
        let forged = src.path().join("forged.db");
        export(other.path(), "r2", &forged).unwrap();
        Connection::open(&forged)
            .unwrap()
            .execute("INSERT INTO events SELECT * FROM events WHERE seq = 1", [])
            .unwrap();
        let err = import(dst.path(), &forged).unwrap_err().to_string();
        assert!(err.contains("holds event 1 of one attempt"), "{err}");
        assert!(events(dst.path(), "r2").is_empty(), "nothing was imported");
    }

    /// Round z8: an event missing from one file arrives with a later one;
    /// a file holding an attempt twice is refused; a history whose largest
    /// rowid was planted still takes each event once and finds it.
    #[test]
    fn import_fills_gaps_refuses_twins_and_survives_a_planted_rowid() {
        let ok = [("p", Outcome::Succeeded)];
        let (src, _s) = store_with(whole_run("r1", 1, 0, &ok, 5, Some(RunStatus::Succeeded)));
        let (dst, _d) = store_with(whole_run("r1", 1, 0, &ok, 3, None));
        let full = src.path().join("full.db");
        export(src.path(), "r1", &full).unwrap();
        let gap = src.path().join("gap.db");
        std::fs::copy(&full, &gap).unwrap();
        Connection::open(&gap)
            .unwrap()
            .execute("DELETE FROM events WHERE seq = 3", [])
            .unwrap();
        let sorted = |state: &Path| {
            let mut v = events(state, "r1");
            v.sort_by_key(|e| e.3);
            v
        };
        assert_eq!(import(dst.path(), &gap).unwrap().0.events, 1);
        assert_eq!(import(dst.path(), &full).unwrap().0.events, 1);
        assert_eq!(sorted(dst.path()), sorted(src.path()));

        let twin = src.path().join("twin.db");
        std::fs::copy(&full, &twin).unwrap();
        Connection::open(&twin)
            .unwrap()
            .execute_batch(
                "CREATE TABLE loose AS SELECT * FROM attempts;
                 INSERT INTO loose SELECT * FROM attempts;
                 UPDATE loose SET id = id + 100 WHERE rowid > (SELECT count(*) FROM attempts);
                 DROP TABLE attempts;
                 ALTER TABLE loose RENAME TO attempts;",
            )
            .unwrap();
        let err = import(dst.path(), &twin).unwrap_err().to_string();
        assert!(
            err.contains("holds attempt 1 of `p/a` in run `r1` twice"),
            "{err}"
        );
        // Values of a type orch never writes (a negative number, a name
        // as bytes) are refused, not stored for every later read to trip on.
        for change in [
            "UPDATE events SET seq = -1 WHERE seq = 0",
            "UPDATE attempts SET agent = CAST(agent AS BLOB)",
            "UPDATE attempts SET turns = 'many'",
            "UPDATE phases SET attempts = -1",
            "UPDATE runs SET started_ms = 1.5",
        ] {
            let odd = src.path().join("odd.db");
            std::fs::copy(&full, &odd).unwrap();
            Connection::open(&odd).unwrap().execute(change, []).unwrap();
            let err = import(dst.path(), &odd).unwrap_err().to_string();
            assert!(err.contains("values orch never writes"), "{change}: {err}");
        }
        assert_eq!(sorted(dst.path()), sorted(src.path()));

        let (planted, _p) = store_with([]);
        Connection::open(planted.path().join(DB_FILE))
            .unwrap()
            .execute(
                "INSERT INTO events (rowid, attempt_id, seq, ts_ms, kind, data_json, raw)
                 VALUES (9223372036854775807, 999999, 0, 0, 'raw', 'null', 'planted')",
                [],
            )
            .unwrap();
        assert_eq!(import(planted.path(), &full).unwrap().0.events, 5);
        assert_eq!(import(planted.path(), &full).unwrap().0.events, 0);
        assert_eq!(sorted(planted.path()), sorted(src.path()));
    }

    fn learnings(state: &Path) -> i64 {
        let conn = Connection::open(state.join(DB_FILE)).unwrap();
        conn.query_row("SELECT count(*) FROM learnings", [], |r| r.get(0))
            .unwrap()
    }

    /// Import merges reports by content: every report of the file arrives
    /// once (two alike included: an agent may say the same thing twice in
    /// one millisecond), task references follow their task's new id,
    /// importing again adds nothing, and a later export of the same run
    /// adds only what is new.
    #[test]
    fn import_keeps_every_report_once() {
        let ok = [("p", Outcome::Succeeded)];
        let (src, _s) = store_with(whole_run("r1", 1, 0, &ok, 2, Some(RunStatus::Succeeded)));
        let src = src.path();
        let r = reports(src, "r1");
        let task = r
            .append(ReportKind::TaskStarted, None, &json!({"task": "one"}), 1)
            .unwrap();
        r.append(
            ReportKind::Comment,
            Some(task),
            &json!({"text": "on it"}),
            2,
        )
        .unwrap();
        for _ in 0..2 {
            r.append(ReportKind::Comment, None, &json!({"text": "same"}), 3)
                .unwrap();
        }
        r.append(
            ReportKind::TaskCompleted,
            Some(task),
            &json!({"task": "one"}),
            4,
        )
        .unwrap();
        r.add_learning(
            &NewLearning {
                learning_type: "pattern",
                pattern: "run the tests first",
                context: "c",
                applies_to: "*",
            },
            5,
        )
        .unwrap();
        drop(r);
        let file = src.join("r1.db");
        export(src, "r1", &file).unwrap();

        // The destination holds another run's reports first, so ids differ.
        let (dst, _d) = store_with(whole_run("r0", 1, 0, &ok, 1, Some(RunStatus::Succeeded)));
        let dst = dst.path();
        let r = reports(dst, "r0");
        for ts in 0..3 {
            r.append(ReportKind::Comment, None, &json!({"text": "same"}), ts)
                .unwrap();
        }
        drop(r);

        let (want, _) = contents(src, "r1");
        assert_eq!(want.len(), 5);
        let (moved, runs) = import(dst, &file).unwrap();
        assert_eq!(runs, vec!["r1".to_string()]);
        assert_eq!(moved.reports, 5);
        assert_eq!(moved.learnings, 1);
        let (got, ids) = contents(dst, "r1");
        assert_eq!(got, want, "nothing lost, doubled or misattached");
        // The events too, under the destination's ids of their attempts.
        assert_eq!(moved.events, 2);
        assert_eq!(events(dst, "r1"), events(src, "r1"));
        assert_eq!(events(dst, "r0").len(), 1);

        // Again: nothing moves, nothing changes.
        let (moved, _) = import(dst, &file).unwrap();
        assert_eq!((moved.reports, moved.learnings, moved.events), (0, 0, 0));
        assert_eq!(contents(dst, "r1"), (want, ids.clone()));
        assert_eq!(learnings(dst), 1);
        assert_eq!(contents(dst, "r0").0.len(), 3);

        // The run goes on where it was exported from: a later export adds
        // what is new, the same report said a third time included.
        let r = reports(src, "r1");
        r.append(ReportKind::Comment, None, &json!({"text": "same"}), 3)
            .unwrap();
        r.append(ReportKind::Comment, Some(task), &json!({"text": "done"}), 6)
            .unwrap();
        drop(r);
        export(src, "r1", &file).unwrap();
        let (moved, _) = import(dst, &file).unwrap();
        assert_eq!(moved.reports, 2);
        let (got, again) = contents(dst, "r1");
        assert_eq!(got, contents(src, "r1").0);
        assert_eq!(again[..5], ids[..]);
        let (moved, _) = import(dst, &file).unwrap();
        assert_eq!(moved.reports, 0);
    }
}

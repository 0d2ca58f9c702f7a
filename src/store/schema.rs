//! The database schema and its migrations, tracked by `PRAGMA user_version`,
//! and how every connection to `state.db` is set up.
//!
//! `MIGRATIONS[i]` takes a database from version `i` to `i + 1`. Steps are
//! only ever appended: a released step never changes. A database newer than
//! the last step is refused rather than guessed at.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::error::StoreError;

/// The database file inside the state directory.
pub(crate) const DB_FILE: &str = "state.db";

/// The folder of the state directory holding the memory files agents
/// write through orch's server (`update_memory`).
pub(crate) const MEMORY_DIR: &str = "memory";

/// How long a connection waits for another one's lock before giving up.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema steps, in order.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: runs, phases, attempts, events, artifacts.
    r#"
    CREATE TABLE runs (
        run_id        TEXT PRIMARY KEY NOT NULL,
        pipeline_name TEXT NOT NULL,
        pipeline_path TEXT NOT NULL,
        digest        TEXT NOT NULL,
        digests_json  TEXT NOT NULL,
        selection     TEXT NOT NULL,
        pid           INTEGER NOT NULL,
        status        TEXT NOT NULL,
        started_ms    INTEGER NOT NULL,
        ended_ms      INTEGER
    );
    -- `orch runs list` (newest first), `--resume` (latest of a pipeline),
    -- and the liveness checks (runs still `running`).
    CREATE INDEX runs_started ON runs (started_ms);
    CREATE INDEX runs_pipeline ON runs (pipeline_path, started_ms);
    CREATE INDEX runs_running ON runs (status) WHERE status = 'running';

    CREATE TABLE phases (
        run_id     TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        phase      TEXT NOT NULL,
        status     TEXT NOT NULL,
        attempts   INTEGER NOT NULL DEFAULT 0,
        started_ms INTEGER,
        ended_ms   INTEGER,
        PRIMARY KEY (run_id, phase)
    );

    CREATE TABLE attempts (
        run_id     TEXT NOT NULL,
        phase      TEXT NOT NULL,
        agent      TEXT NOT NULL,
        attempt    INTEGER NOT NULL,
        argv_json  TEXT NOT NULL DEFAULT '[]',
        env_json   TEXT NOT NULL DEFAULT '{}',
        outcome    TEXT NOT NULL,
        exit_code  INTEGER,
        reason     TEXT,
        session_id TEXT,
        turns      INTEGER NOT NULL DEFAULT 0,
        tokens_in  INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cost_usd   REAL,
        started_ms INTEGER,
        ended_ms   INTEGER,
        PRIMARY KEY (run_id, phase, agent, attempt),
        FOREIGN KEY (run_id, phase) REFERENCES phases (run_id, phase) ON DELETE CASCADE
    );

    CREATE TABLE events (
        run_id    TEXT NOT NULL,
        phase     TEXT NOT NULL,
        agent     TEXT NOT NULL,
        attempt   INTEGER NOT NULL,
        seq       INTEGER NOT NULL,
        ts_ms     INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        data_json TEXT NOT NULL,
        raw       TEXT NOT NULL,
        PRIMARY KEY (run_id, phase, agent, attempt, seq),
        FOREIGN KEY (run_id, phase, agent, attempt)
            REFERENCES attempts (run_id, phase, agent, attempt) ON DELETE CASCADE
    );
    -- No other index: each one costs a fifth of the insert rate. Arrival
    -- order is the rowid; a run's rowid bounds come from the key's index
    -- (see `Reader::events`).

    CREATE TABLE artifacts (
        run_id TEXT NOT NULL,
        phase  TEXT NOT NULL,
        path   TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        PRIMARY KEY (run_id, phase, path),
        FOREIGN KEY (run_id, phase) REFERENCES phases (run_id, phase) ON DELETE CASCADE
    );
    "#,
    // 2: where each run's events are, as spans of rowids, so that reading
    // a run's events from a cursor (`Reader::events`) seeks instead of
    // scanning every index entry of the run for its rowid bounds (step 1's
    // note). The writer keeps the spans, a statement or two per batch (see
    // `writer::EventSpans`); an index on `events (run_id)` would serve the
    // same reads but cost every insert (about 15% of the events per second
    // of `cargo bench --bench store`). A history written before gets one
    // span per run, from its first event to its last.
    r#"
    CREATE TABLE event_spans (
        run_id   TEXT NOT NULL,
        first_id INTEGER NOT NULL,
        last_id  INTEGER NOT NULL,
        PRIMARY KEY (run_id, first_id)
    ) WITHOUT ROWID;
    INSERT INTO event_spans (run_id, first_id, last_id)
        SELECT run_id, min(rowid), max(rowid) FROM events GROUP BY run_id;
    "#,
    // 3: what agents report through orch's MCP server (one server process
    // per agent, each with its own connection; see `reports.rs`). Every
    // row is appended, never updated, and stamped with the attempt that
    // wrote it. No foreign key to `attempts`: a server may write before
    // the engine's writer thread has committed its attempt's row.
    // Learnings are their own table, searched across runs with FTS5 (kept
    // by the writer in the same transaction: orch defines no triggers);
    // `normalized` refuses a duplicate whatever its case and punctuation.
    r#"
    CREATE TABLE reports (
        id        INTEGER PRIMARY KEY,
        run_id    TEXT NOT NULL,
        phase     TEXT NOT NULL,
        agent     TEXT NOT NULL,
        attempt   INTEGER NOT NULL,
        ts_ms     INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        task_id   INTEGER,
        data_json TEXT NOT NULL
    );
    CREATE INDEX reports_run ON reports (run_id, kind);

    CREATE TABLE learnings (
        id            INTEGER PRIMARY KEY,
        run_id        TEXT NOT NULL,
        phase         TEXT NOT NULL,
        agent         TEXT NOT NULL,
        attempt       INTEGER NOT NULL,
        ts_ms         INTEGER NOT NULL,
        learning_type TEXT NOT NULL,
        pattern       TEXT NOT NULL,
        context       TEXT NOT NULL,
        applies_to    TEXT NOT NULL,
        quality       INTEGER NOT NULL,
        normalized    TEXT NOT NULL UNIQUE
    );
    CREATE VIRTUAL TABLE learnings_fts USING fts5 (
        pattern, context, applies_to,
        content = 'learnings', content_rowid = 'id'
    );
    "#,
    // 4: the index of project documents (`search_knowledge`), per
    // workspace; a file is indexed again when its hash changes.
    r#"
    CREATE TABLE knowledge_files (
        workspace TEXT NOT NULL,
        path      TEXT NOT NULL,
        sha256    TEXT NOT NULL,
        PRIMARY KEY (workspace, path)
    ) WITHOUT ROWID;
    CREATE VIRTUAL TABLE knowledge_fts USING fts5 (
        workspace UNINDEXED, path UNINDEXED, heading, body
    );
    "#,
    // 5: the size of the prompts each attempt was sent.
    r#"
    ALTER TABLE attempts ADD COLUMN prompt_json TEXT NOT NULL DEFAULT '{}';
    "#,
    // 6: whether a phase was required and why it did not succeed, so a
    // stored run reports exactly as the live one did (JUnit, summaries).
    r#"
    ALTER TABLE phases ADD COLUMN required INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE phases ADD COLUMN reason TEXT;
    "#,
    // 7: an event names its attempt by an integer id, not by the four
    // texts of the attempt's key. Every insert seeks the events' key and
    // checked the foreign key: comparing (run, phase, agent) strings at
    // each level of both B-trees was most of the writer's time (a profile
    // of 200,000 events). No foreign key any more: the writer takes the id
    // from the attempt's row (see `writer::AttemptIds`), as an import does
    // (`transfer::merge`), and nothing deletes attempts; the check cost a
    // seek per event. An id is never given twice (AUTOINCREMENT), so
    // events left by a deleted attempt could never pass for a later one's.
    // Rowids are kept: an attempt's `id` is its old rowid, an event's
    // rowid (and with it `event_spans`) is unchanged.
    r#"
    CREATE TABLE attempts_v7 (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id     TEXT NOT NULL,
        phase      TEXT NOT NULL,
        agent      TEXT NOT NULL,
        attempt    INTEGER NOT NULL,
        argv_json  TEXT NOT NULL DEFAULT '[]',
        env_json   TEXT NOT NULL DEFAULT '{}',
        outcome    TEXT NOT NULL,
        exit_code  INTEGER,
        reason     TEXT,
        session_id TEXT,
        turns      INTEGER NOT NULL DEFAULT 0,
        tokens_in  INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cost_usd   REAL,
        started_ms INTEGER,
        ended_ms   INTEGER,
        prompt_json TEXT NOT NULL DEFAULT '{}',
        UNIQUE (run_id, phase, agent, attempt),
        FOREIGN KEY (run_id, phase) REFERENCES phases (run_id, phase) ON DELETE CASCADE
    );
    INSERT INTO attempts_v7 (id, run_id, phase, agent, attempt, argv_json, env_json, outcome,
                             exit_code, reason, session_id, turns, tokens_in, tokens_out,
                             cost_usd, started_ms, ended_ms, prompt_json)
        SELECT rowid, run_id, phase, agent, attempt, argv_json, env_json, outcome,
               exit_code, reason, session_id, turns, tokens_in, tokens_out,
               cost_usd, started_ms, ended_ms, prompt_json
        FROM attempts ORDER BY rowid;

    CREATE TABLE events_v7 (
        attempt_id INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        ts_ms      INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        data_json  TEXT NOT NULL,
        raw        TEXT NOT NULL,
        PRIMARY KEY (attempt_id, seq)
    );
    INSERT INTO events_v7 (rowid, attempt_id, seq, ts_ms, kind, data_json, raw)
        SELECT e.rowid, a.id, e.seq, e.ts_ms, e.kind, e.data_json, e.raw
        FROM events e JOIN attempts_v7 a
          ON a.run_id = e.run_id AND a.phase = e.phase AND a.agent = e.agent
             AND a.attempt = e.attempt
        ORDER BY e.rowid;

    DROP TABLE events;
    DROP TABLE attempts;
    ALTER TABLE attempts_v7 RENAME TO attempts;
    ALTER TABLE events_v7 RENAME TO events;
    "#,
    // 8: events are found by spans of rowids alone, no key of their own.
    // Keeping `(attempt_id, seq)` as the table's primary key cost a second
    // B-tree insert per event, about a third of the writer's time (a
    // profile of 200,000 events). The writer gives each attempt's events
    // increasing `seq` in arrival order, so what it writes is in seq order
    // by rowid within an attempt (an import that fills a gap adds the
    // missing events later); an import refuses a file that repeats an
    // attempt's number and adds the numbers not here yet
    // (`transfer::merge`).
    // `attempt_spans` lists, per attempt, stretches of rowids that hold all
    // of its events; a stretch may hold other attempts' events too (the
    // writer extends an attempt's last stretch over a short gap rather than
    // start a new one when attempts interleave), so readers also match
    // `attempt_id`.
    r#"
    -- How many events each attempt has, kept by the writer (and an
    -- import) as it adds them: counting through spans that stretch over
    -- other attempts' rows would read every row of the attempts beside it.
    -- Counted here while the events' key still stands.
    ALTER TABLE attempts ADD COLUMN events INTEGER NOT NULL DEFAULT 0;
    UPDATE attempts SET events = c.n
        FROM (SELECT attempt_id, count(*) AS n FROM events GROUP BY attempt_id) AS c
        WHERE c.attempt_id = attempts.id;

    CREATE TABLE attempt_spans (
        attempt_id INTEGER NOT NULL,
        first_id   INTEGER NOT NULL,
        last_id    INTEGER NOT NULL,
        PRIMARY KEY (attempt_id, first_id)
    ) WITHOUT ROWID;
    INSERT INTO attempt_spans (attempt_id, first_id, last_id)
        SELECT attempt_id, min(rowid), max(rowid) FROM events GROUP BY attempt_id;

    CREATE TABLE events_v8 (
        attempt_id INTEGER NOT NULL,
        seq        INTEGER NOT NULL,
        ts_ms      INTEGER NOT NULL,
        kind       TEXT NOT NULL,
        data_json  TEXT NOT NULL,
        raw        TEXT NOT NULL
    );
    INSERT INTO events_v8 (rowid, attempt_id, seq, ts_ms, kind, data_json, raw)
        SELECT rowid, attempt_id, seq, ts_ms, kind, data_json, raw FROM events ORDER BY rowid;
    DROP TABLE events;
    ALTER TABLE events_v8 RENAME TO events;

    -- The runs' spans again, each a stretch of rowids holding only its
    -- run's events: a writer before this step let a span run backwards
    -- when the largest rowid had been planted (SQLite then hands out any
    -- free rowid), hiding the run's events from every reader (round z8).
    -- One pass in rowid order: an island starts where the run changes.
    DELETE FROM event_spans;
    INSERT INTO event_spans (run_id, first_id, last_id)
        SELECT run_id, min(id), max(id) FROM (
            SELECT id, run_id,
                   sum(changed) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS island
            FROM (SELECT e.rowid AS id, a.run_id AS run_id,
                         a.run_id IS NOT lag(a.run_id) OVER (ORDER BY e.rowid) AS changed
                  FROM events e JOIN attempts a ON a.id = e.attempt_id))
        GROUP BY island;
    "#,
];

/// The last step that changes what an older orch writes (7: events name
/// their attempt by id; 8: the writer keeps `attempt_spans`): an orch that
/// stops before it could no longer write here.
const LAST_BREAKING: i64 = 8;

/// The schema version this code writes.
pub(super) fn latest_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Open `path` (creating it when `create`), set the connection up (WAL,
/// `synchronous = NORMAL`, foreign keys, busy timeout) and bring the schema
/// up to date.
pub(super) fn open(path: &Path, create: bool) -> Result<Connection, StoreError> {
    let open_err = |source| StoreError::Open {
        path: path.to_path_buf(),
        source,
    };
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let mut conn = Connection::open_with_flags(path, flags).map_err(open_err)?;
    configure(&conn).map_err(open_err)?;
    let mut dropped = migrate(&mut conn, path)?;
    if create {
        dropped.extend(drop_foreign_objects(&conn).map_err(open_err)?);
    }
    for (kind, name) in dropped {
        eprintln!(
            "warning: removed {kind} `{name}` from {}: orch defines none, so something else that could write the database (an agent granted orch's server, or one whose workspace holds it) planted it",
            path.display()
        );
    }
    Ok(conn)
}

/// Drop every trigger and view in the database: orch's schema has none,
/// and one planted by another writer would act on every later run (a
/// trigger that deletes each event as it is recorded). The dropped ones,
/// as (kind, name).
fn drop_foreign_objects(conn: &Connection) -> rusqlite::Result<Vec<(String, String)>> {
    let found: Vec<(String, String)> = conn
        .prepare("SELECT type, name FROM sqlite_schema WHERE type IN ('trigger', 'view')")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (kind, name) in &found {
        let quoted = name.replace('"', "\"\"");
        conn.execute_batch(&format!(
            "DROP {} IF EXISTS \"{quoted}\"",
            kind.to_uppercase()
        ))?;
    }
    Ok(found)
}

/// The per-connection settings.
fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Only takes effect on a new database (before WAL is on): 16 KiB pages
    // insert events about a third faster than the default 4 KiB.
    conn.execute_batch("PRAGMA page_size = 16384")?;
    // `journal_mode` answers with the mode now in force.
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;",
    )?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(())
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Apply the missing migration steps, all in one transaction that holds
/// the write lock, so two processes opening a fresh database at once
/// cannot both migrate it. Applying them again is a no-op. Triggers and
/// views go first, in the same transaction (orch defines none; one that
/// names a table a step rebuilds would fail the step, and with it every
/// later open): the ones dropped, as (kind, name).
pub(super) fn migrate(
    conn: &mut Connection,
    path: &Path,
) -> Result<Vec<(String, String)>, StoreError> {
    let known = latest_version();
    let too_new = |found| StoreError::TooNew {
        path: path.to_path_buf(),
        found,
        known,
    };
    // The common case (up to date) takes no write lock.
    let found = user_version(conn)?;
    if found == known {
        return Ok(Vec::new());
    }
    if found > known {
        return Err(too_new(found));
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = user_version(&tx)?;
    if found > known {
        return Err(too_new(found));
    }
    // A step that changes what an older orch writes (7: events by attempt
    // id; 8: attempt spans) waits until no other orch runs here: one still
    // running would lose every record it sends after it (or leave its
    // events out of every span). Whether one runs is the run
    // lock's word, not a recorded pid (round z7: a run left `running`
    // under pid 1 by an orch killed with its container blocked every
    // later open).
    if (1..LAST_BREAKING).contains(&found)
        && path
            .parent()
            .is_some_and(super::lock::RunLock::held_elsewhere)
    {
        let who = match super::query::live_runs_of_others(&tx, None, std::process::id())?.first() {
            Some((run, pid)) => format!("run `{run}`, pid {pid}"),
            None => "it holds the run lock".to_string(),
        };
        return Err(StoreError::UpgradeWaits {
            path: path.to_path_buf(),
            who,
        });
    }
    let dropped = drop_foreign_objects(&tx)?;
    for (i, step) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", i as i64 + 1)?;
    }
    tx.commit()?;
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;

    /// A database at `path` as version `version` of orch left it.
    fn history_at(path: &Path, version: usize) -> Connection {
        let conn = Connection::open(path).unwrap();
        for step in &MIGRATIONS[..version] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn
    }

    fn tables(conn: &Connection) -> Vec<String> {
        let mut st = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn creates_every_table_and_sets_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("state.db"), true).unwrap();
        assert_eq!(
            tables(&conn),
            [
                "artifacts",
                "attempt_spans",
                "attempts",
                "event_spans",
                "events",
                "knowledge_files",
                "knowledge_fts",
                "knowledge_fts_config",
                "knowledge_fts_content",
                "knowledge_fts_data",
                "knowledge_fts_docsize",
                "knowledge_fts_idx",
                "learnings",
                "learnings_fts",
                "learnings_fts_config",
                "learnings_fts_data",
                "learnings_fts_docsize",
                "learnings_fts_idx",
                "phases",
                "reports",
                "runs",
                "sqlite_sequence"
            ]
        );
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(fk, 1);
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 1, "NORMAL");
        let page: i64 = conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(page, 16384);
    }

    #[test]
    fn migrating_again_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let mut conn = open(&path, true).unwrap();
        conn.execute(
            "INSERT INTO runs VALUES ('r', 'p', 'p.toml', 'd', '{}', 'all', 1, 'running', 0, NULL)",
            [],
        )
        .unwrap();
        migrate(&mut conn, &path).unwrap();
        drop(conn);
        let conn = open(&path, true).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1, "the data survives reopening");
    }

    #[test]
    fn an_old_database_is_brought_up_to_date() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        // Version 0: an empty database, as a first `open` finds it.
        Connection::open(&path).unwrap();
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        assert_eq!(tables(&conn).len(), 22);
    }

    /// A history from before `event_spans`: a span per run, from its
    /// first event to its last, and its events read as before.
    #[test]
    fn a_version_one_history_gets_its_event_spans() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            for run in ["a", "b"] {
                conn.execute_batch(&format!(
                    "INSERT INTO runs VALUES ('{run}', 'p', 'p.toml', 'd', '{{}}', 'all', 1, 'failed', 0, 1);
                     INSERT INTO phases VALUES ('{run}', 'x', 'failed', 1, 0, 1);
                     INSERT INTO attempts (run_id, phase, agent, attempt, outcome)
                         VALUES ('{run}', 'x', 'y', 1, 'failed');"
                ))
                .unwrap();
            }
            // b's events between a's (a resumed run, say).
            for (seq, run) in ["a", "b", "b", "a"].into_iter().enumerate() {
                conn.execute(
                    "INSERT INTO events VALUES (?1, 'x', 'y', 1, ?2, 0, 'raw', 'null', ?3)",
                    params![run, seq, format!("{run}{seq}")],
                )
                .unwrap();
            }
        }
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let mut st = conn
            .prepare("SELECT run_id, first_id, last_id FROM event_spans ORDER BY run_id, first_id")
            .unwrap();
        let spans: Vec<(String, i64, i64)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        // Step 2 made a span per run, from its first event to its last;
        // step 8 remade them as stretches that hold only the run's events.
        assert_eq!(
            spans,
            [("a".into(), 1, 1), ("a".into(), 4, 4), ("b".into(), 2, 3)]
        );
        drop(st);
        let reader = super::super::query::Reader::new(conn, path);
        let raws = |run| -> Vec<String> {
            let page = reader.events(run, None, 0, 100).unwrap();
            page.events.into_iter().map(|e| e.raw).collect()
        };
        assert_eq!(raws("a"), ["a0", "a3"]);
        assert_eq!(raws("b"), ["b1", "b2"]);
    }

    /// A history from before attempt ids: every event is kept, under its
    /// attempt's id, with its rowid (so its run's spans still hold).
    #[test]
    fn a_version_six_history_keeps_its_events_under_attempt_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = history_at(&path, 6);
            for run in ["a", "b"] {
                conn.execute_batch(&format!(
                    "INSERT INTO runs VALUES ('{run}', 'p', 'p.toml', 'd', '{{}}', 'all', 1, 'failed', 0, 1);
                     INSERT INTO phases (run_id, phase, status) VALUES ('{run}', 'x', 'failed');
                     INSERT INTO attempts (run_id, phase, agent, attempt, outcome, turns)
                         VALUES ('{run}', 'x', 'y', 1, 'failed', 7), ('{run}', 'x', 'y', 2, 'failed', 8);"
                ))
                .unwrap();
            }
            for (seq, (run, attempt)) in [("a", 2), ("b", 1), ("b", 2), ("a", 1), ("a", 2)]
                .into_iter()
                .enumerate()
            {
                conn.execute(
                    "INSERT INTO events VALUES (?1, 'x', 'y', ?2, ?3, 0, 'raw', 'null', ?4)",
                    params![run, attempt, seq, format!("{run}{attempt}.{seq}")],
                )
                .unwrap();
                let id = conn.last_insert_rowid();
                conn.execute(
                    "INSERT INTO event_spans VALUES (?1, ?2, ?2)",
                    params![run, id],
                )
                .unwrap();
            }
        }
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let mut st = conn
            .prepare(
                "SELECT e.rowid, a.run_id, a.attempt, a.turns, e.raw
                 FROM events e JOIN attempts a ON a.id = e.attempt_id ORDER BY e.rowid",
            )
            .unwrap();
        let rows: Vec<(i64, String, u32, u32, String)> = st
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let want = [
            (1, "a", 2, 8, "a2.0"),
            (2, "b", 1, 7, "b1.1"),
            (3, "b", 2, 8, "b2.2"),
            (4, "a", 1, 7, "a1.3"),
            (5, "a", 2, 8, "a2.4"),
        ];
        let want: Vec<(i64, String, u32, u32, String)> = want
            .into_iter()
            .map(|(i, r, a, t, raw)| (i, r.into(), a, t, raw.into()))
            .collect();
        assert_eq!(rows, want);
        drop(st);
        let reader = super::super::query::Reader::new(conn, path);
        let read = |run| -> Vec<(u32, String)> {
            let page = reader.events(run, None, 0, 100).unwrap();
            page.events
                .into_iter()
                .map(|e| (e.attempt, e.raw))
                .collect()
        };
        assert_eq!(
            read("a"),
            [(2, "a2.0".into()), (1, "a1.3".into()), (2, "a2.4".into())]
        );
        assert_eq!(read("b"), [(1, "b1.1".into()), (2, "b2.2".into())]);
        assert_eq!(reader.event_count("a").unwrap(), 3);
    }

    /// A history from before attempt spans: each attempt gets one span
    /// over all of its events, the events lose their key and keep their
    /// rowids, and counts and tails per attempt read as before.
    #[test]
    fn a_version_seven_history_gets_its_attempt_spans() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = history_at(&path, 7);
            conn.execute_batch(
                "INSERT INTO runs VALUES ('a', 'p', 'p.toml', 'd', '{}', 'all', 1, 'failed', 0, 1);
                 INSERT INTO phases (run_id, phase, status) VALUES ('a', 'x', 'failed');
                 INSERT INTO attempts (run_id, phase, agent, attempt, outcome)
                     VALUES ('a', 'x', 'y', 1, 'failed'), ('a', 'x', 'z', 1, 'failed');",
            )
            .unwrap();
            // y's and z's events interleaved, as two agents side by side.
            let mut seqs = [0, 0];
            for who in [1, 2, 1, 1, 2, 1] {
                let seq = seqs[who - 1];
                seqs[who - 1] += 1;
                conn.execute(
                    "INSERT INTO events VALUES (?1, ?2, 0, 'raw', 'null', ?3)",
                    params![who, seq, format!("{who}.{seq}")],
                )
                .unwrap();
            }
            // Backwards, as a writer before step 8 left it after a planted
            // largest rowid.
            conn.execute("INSERT INTO event_spans VALUES ('a', 6, 1)", [])
                .unwrap();
        }
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let spans: Vec<(i64, i64, i64)> = conn
            .prepare("SELECT attempt_id, first_id, last_id FROM attempt_spans ORDER BY attempt_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(spans, [(1, 1, 6), (2, 2, 5)]);
        let keys: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(keys, 0);
        let reader = super::super::query::Reader::new(conn, path);
        assert_eq!(reader.events("a", None, 0, 100).unwrap().events.len(), 6);
        let run = reader.run("a").unwrap().unwrap();
        let agents: Vec<(String, u64, Vec<String>)> = run.phases[0]
            .agents
            .iter()
            .map(|a| (a.agent.clone(), a.events, a.output.clone()))
            .collect();
        let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            agents,
            [
                ("y".to_string(), 4, lines(&["1.0", "1.1", "1.2", "1.3"])),
                ("z".to_string(), 2, lines(&["2.0", "2.1"])),
            ]
        );
    }

    /// A view or trigger naming a table step 7 rebuilds (planted, or a
    /// user's own report) made the step fail, and every later open with
    /// it: it goes first, in the migration's transaction.
    #[test]
    fn a_view_on_the_events_does_not_stop_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = history_at(&path, 6);
            conn.execute_batch(
                "CREATE VIEW mine AS SELECT run_id, count(*) FROM events GROUP BY run_id;
                 CREATE TRIGGER t AFTER INSERT ON runs BEGIN
                     INSERT INTO events SELECT run_id, 'x', 'y', 1, 0, 0, 'k', 'null', 'r'
                     FROM runs LIMIT 0;
                 END;",
            )
            .unwrap();
        }
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type IN ('view', 'trigger')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0);
    }

    /// An orch from before step 7 still running here would lose every
    /// event it sends after the upgrade: the upgrade waits for it.
    #[test]
    fn the_upgrade_waits_for_an_older_orch_still_running() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        // The older orch's run lock: another open of the file, as another
        // process holds it.
        let lock = std::fs::File::create(dir.path().join(super::super::lock::LOCK_FILE)).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        let taken = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(taken, 0);
        {
            let conn = Connection::open(&path).unwrap();
            for step in &MIGRATIONS[..6] {
                conn.execute_batch(step).unwrap();
            }
            conn.pragma_update(None, "user_version", 6).unwrap();
            conn.execute(
                "INSERT INTO runs VALUES ('r', 'p', 'p.toml', 'd', '{}', 'all', 1, 'running', 0, NULL)",
                [],
            )
            .unwrap();
        }
        let err = open(&path, false).unwrap_err();
        assert!(matches!(err, StoreError::UpgradeWaits { .. }), "{err}");
        // Gone (the lock free), the row left `running` under pid 1 (an
        // orch killed with its container) no longer holds the upgrade.
        drop(lock);
        let conn = open(&path, false).unwrap();
        assert_eq!(user_version(&conn).unwrap(), latest_version());
    }

    #[test]
    fn a_newer_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", latest_version() + 7)
                .unwrap();
        }
        let err = open(&path, true).unwrap_err();
        match &err {
            StoreError::TooNew { found, known, .. } => {
                assert_eq!(*found, latest_version() + 7);
                assert_eq!(*known, latest_version());
            }
            other => panic!("expected TooNew, got {other:?}"),
        }
        assert!(err.to_string().contains("newer than this orch knows"));
        // Nothing was created in it.
        let conn = Connection::open(&path).unwrap();
        assert!(tables(&conn).is_empty());
    }

    #[test]
    fn a_missing_database_is_not_created_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        assert!(matches!(open(&path, false), Err(StoreError::Open { .. })));
        assert!(!path.exists());
    }
}

//! `orch runs list|show|events` over a history written through the library
//! (`orch::store`), in a temporary state directory.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use orch::store::fixture::{
    artifact, attempt, dead_pid, digest_of, phase_finished, phase_started, run_finished,
    run_started,
};
use orch::store::{Outcome, RunStatus, Store};

use crate::support::{self, finish_within, json_of, stderr, stdout};

/// 2025-01-01T12:00:00Z.
const T0: u64 = 1_735_732_800_000;

const OK_RUN: &str = "20250101T120000-abcd";
const FAILED_RUN: &str = "20250102T090000-ef01";
const KILLED_RUN: &str = "20250102T100000-ef99";

fn runs(dir: &Path, args: &[&str]) -> Output {
    let mut v = vec!["runs"];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--state-dir", dir.to_str().unwrap()]);
    support::run(&v)
}

/// stderr with miette's line wrapping undone.
fn flat_stderr(o: &Output) -> String {
    stderr(o)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

/// Three runs: one that succeeded, one that failed (a retried phase and
/// a skipped one), one whose orch died mid-phase.
fn history(dir: &Path) {
    let store = Store::open(dir).unwrap();
    let w = store.writer();
    let me = std::process::id();
    let ok_build = attempt(OK_RUN, "build", "shell", 1);
    let f_build = attempt(FAILED_RUN, "build", "shell", 1);
    let f_test1 = attempt(FAILED_RUN, "test", "unit", 1);
    let f_test2 = attempt(FAILED_RUN, "test", "unit", 2);
    let k_build = attempt(KILLED_RUN, "build", "shell", 1);
    let day = 86_400_000;
    // The failed run: a day later, 09:00.
    let t1 = T0 + day - 3 * 3_600_000;
    let records = vec![
        run_started(OK_RUN, me, T0),
        phase_started(OK_RUN, "build", T0 + 10),
        ok_build.start(T0 + 10),
        ok_build.event_of(0, T0 + 20, "stderr", "null", "compiling"),
        ok_build.event_of(
            1,
            T0 + 1_250,
            "tool_call",
            r#"{"kind":"tool_call","id":null,"name":"Read","input":{"file_path":"a.rs"}}"#,
            r#"{"type":"tool_use"}"#,
        ),
        ok_build.finish(Outcome::Succeeded, T0 + 3_260),
        phase_finished(OK_RUN, "build", Outcome::Succeeded, 1, T0 + 3_260),
        artifact(OK_RUN, "build", "dist/app", &"ab".repeat(32)),
        run_finished(OK_RUN, RunStatus::Succeeded, T0 + 3_300),
        run_started(FAILED_RUN, me, t1),
        phase_started(FAILED_RUN, "build", t1),
        f_build.start(t1),
        f_build.event_of(0, t1 + 5, "raw", "null", "built"),
        f_build.finish(Outcome::Succeeded, t1 + 500),
        phase_finished(FAILED_RUN, "build", Outcome::Succeeded, 1, t1 + 500),
        phase_started(FAILED_RUN, "test", t1 + 500),
        f_test1.start(t1 + 500),
        f_test1.event_of(0, t1 + 600, "raw", "null", "FAIL a"),
        f_test1.finish(Outcome::Failed, t1 + 700),
        f_test2.start(t1 + 800),
        f_test2.event_of(0, t1 + 900, "raw", "null", "FAIL b"),
        f_test2.finish_with(
            Outcome::TimedOut,
            Some(-1),
            Some("timed out after 2m"),
            t1 + 125_800,
        ),
        phase_finished(FAILED_RUN, "test", Outcome::TimedOut, 2, t1 + 125_800),
        phase_finished(FAILED_RUN, "deploy", Outcome::Skipped, 0, t1 + 125_800),
        run_finished(FAILED_RUN, RunStatus::Failed, t1 + 125_900),
    ];
    for r in records {
        w.send(r).unwrap();
    }
    w.flush().unwrap();
    // The killed run is written last, once the other runs are no longer
    // `running` (a live run elsewhere would refuse it).
    let t2 = T0 + day - 2 * 3_600_000;
    for r in [
        run_started(KILLED_RUN, dead_pid(), t2),
        phase_started(KILLED_RUN, "build", t2),
        k_build.start(t2),
        k_build.event_of(0, t2 + 4_000, "raw", "null", "half"),
    ] {
        w.send(r).unwrap();
    }
    store.close().unwrap();
}

/// One run, `run_id`, whose orch died before anything else was recorded.
fn dead_run(dir: &Path, run_id: &str) {
    let store = Store::open(dir).unwrap();
    store
        .writer()
        .send(run_started(run_id, dead_pid(), T0))
        .unwrap();
    store.close().unwrap();
}

#[test]
fn list_shows_every_run_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let o = runs(dir.path(), &["list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "\
RUN                   PIPELINE  STATUS       STARTED               DURATION  PHASES  OK  FAILED
20250102T100000-ef99  demo      interrupted  2025-01-02T10:00:00Z  4.0s      1       0   0
20250102T090000-ef01  demo      failed       2025-01-02T09:00:00Z  2m5s      3       1   1
20250101T120000-abcd  demo      succeeded    2025-01-01T12:00:00Z  3.3s      1       1   0
"
    );
    assert_eq!(stderr(&o), "");

    let o = runs(dir.path(), &["list", "--limit", "1", "--format", "json"]);
    assert_eq!(code(&o), 0);
    let v = json_of(&o);
    let v = v.as_array().unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0]["run_id"], KILLED_RUN);
    assert_eq!(v[0]["status"], "interrupted");
    assert_eq!(v[0]["started_ms"], T0 + 86_400_000 - 2 * 3_600_000);
}

#[test]
fn list_of_an_empty_state_directory() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("never-used");
    let o = runs(&state, &["list"]);
    assert_eq!(code(&o), 0);
    assert_eq!(stdout(&o), "");
    assert!(stderr(&o).contains("no runs recorded in"), "{}", stderr(&o));
    assert!(!state.exists(), "listing creates nothing");
    let o = runs(&state, &["list", "--format", "json"]);
    assert_eq!(stdout(&o), "[]\n");
}

#[test]
fn the_state_directory_comes_from_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    history(&dir.path().join("custom"));
    std::fs::write(dir.path().join("orch.toml"), "state_dir = \"custom\"\n").unwrap();
    let o = support::run_in(dir.path(), &["runs", "list", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v.as_array().unwrap().len(), 3);
}

#[test]
fn show_has_a_row_per_phase_and_attempt() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let o = runs(dir.path(), &["show", "20250102T09"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "\
run        20250102T090000-ef01
pipeline   demo (pipelines/demo.toml)
status     failed
started    2025-01-02T09:00:00Z
duration   2m5s
selection  all
digest     {}
pid        {}

PHASE   STATUS     AGENT  ATTEMPT  OUTCOME    EXIT  DURATION  TURNS  TOKENS    COST     EVENTS  REASON
build   succeeded  shell  1        succeeded  0     500ms     2      1200/300  $0.0125  1
test    timed_out  unit   1        failed     1     200ms     2      1200/300  $0.0125  1       exit status 1
test    timed_out  unit   2        timed_out  -1    2m5s      2      1200/300  $0.0125  1       timed out after 2m
deploy  skipped    -      -        -          -     -         -      -         -        -
",
            digest_of(FAILED_RUN),
            std::process::id()
        )
    );
}

#[test]
fn show_lists_artifacts_and_gives_json() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let o = runs(dir.path(), &["show", OK_RUN]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).ends_with(&format!(
            "\nPHASE  ARTIFACT  SHA256\nbuild  dist/app  {}\n",
            "ab".repeat(32)
        )),
        "{}",
        stdout(&o)
    );

    let o = runs(dir.path(), &["show", "latest", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["run_id"], KILLED_RUN);
    assert_eq!(v["status"], "interrupted");
    assert_eq!(v["phases"][0]["status"], "cancelled");
    assert_eq!(v["phases"][0]["agents"][0]["status"], "cancelled");
    assert_eq!(v["phases"][0]["agents"][0]["events"], 1);
    assert_eq!(v["phases"][0]["agents"][0]["argv"][2], "true");
    assert_eq!(v["digests"]["pipelines/demo.toml"], "abc");
}

#[test]
fn unknown_and_ambiguous_runs_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let o = runs(dir.path(), &["show", "zzz"]);
    assert_eq!(code(&o), 2);
    assert_eq!(stdout(&o), "");
    let err = flat_stderr(&o);
    assert!(err.contains("no run `zzz` in"), "{err}");
    assert!(err.contains("orch runs list"), "{err}");

    let o = runs(dir.path(), &["events", "20250102"]);
    assert_eq!(code(&o), 2);
    let err = flat_stderr(&o);
    assert!(
        err.contains(
            "`20250102` matches more than one run: `20250102T100000-ef99`, `20250102T090000-ef01`"
        ),
        "{err}"
    );

    // No history at all.
    let empty = tempfile::tempdir().unwrap();
    let o = runs(empty.path(), &["show", "latest"]);
    assert_eq!(code(&o), 2);
    assert!(
        flat_stderr(&o).contains("no run `latest`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn events_in_order_by_phase_and_as_json() {
    let dir = tempfile::tempdir().unwrap();
    history(dir.path());
    let o = runs(dir.path(), &["events", OK_RUN]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "\
12:00:00.020  build/shell#1  0  stderr  compiling
12:00:01.250  build/shell#1  1  tool_call  {\"id\":null,\"input\":{\"file_path\":\"a.rs\"},\"name\":\"Read\"}
"
    );

    let o = runs(dir.path(), &["events", FAILED_RUN, "--phase", "test"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "\
09:00:00.600  test/unit#1  0  raw  FAIL a
09:00:00.900  test/unit#2  0  raw  FAIL b
"
    );

    let o = runs(dir.path(), &["events", FAILED_RUN, "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v = json_of(&o);
    let v = v.as_array().unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["phase"], "build");
    assert_eq!(v[2]["attempt"], 2);
    assert_eq!(v[2]["raw"], "FAIL b");
    assert_eq!(v[2]["data"], serde_json::Value::Null);

    let o = runs(dir.path(), &["events", FAILED_RUN, "--phase", "tset"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains(
            "run `20250102T090000-ef01` has no phase `tset` (it has build, test, deploy)"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_empty_json_event_list_is_still_a_document() {
    let dir = tempfile::tempdir().unwrap();
    dead_run(dir.path(), "quiet");
    let o = runs(dir.path(), &["events", "quiet", "--format", "json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "[]\n");
}

/// `orch runs events RUN --follow --format json`, running, its output
/// read line by line as it comes. Killed if the test ends first.
struct Follower {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
}

impl Follower {
    fn spawn(dir: &Path, run: &str) -> Follower {
        let mut child = support::orch()
            .args(["runs", "events", run, "--follow", "--format", "json"])
            .args(["--state-dir", dir.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        // Ends at the end of the output (the child exited or was killed).
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Follower {
            child: Some(child),
            lines,
        }
    }

    /// The `raw` of the next event printed, `None` once the output ended;
    /// fails after `FOLLOW_WAIT`.
    fn next_raw(&self) -> Option<String> {
        match self.lines.recv_timeout(FOLLOW_WAIT) {
            Ok(line) => {
                let v: serde_json::Value =
                    serde_json::from_str(&line).expect("one JSON object a line");
                Some(v["raw"].as_str().unwrap().to_string())
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("`--follow` printed nothing within {FOLLOW_WAIT:?}")
            }
        }
    }

    /// Still running, and printing nothing more for `quiet`.
    fn waits(&mut self, quiet: Duration) {
        match self.lines.recv_timeout(quiet) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            other => panic!("`--follow` should wait for the run, got {other:?}"),
        }
        let child = self.child.as_mut().unwrap();
        assert!(
            child.try_wait().unwrap().is_none(),
            "`--follow` ended early"
        );
    }

    /// How it ended, within `FOLLOW_WAIT`.
    fn end(mut self) -> Output {
        finish_within(self.child.take().unwrap(), FOLLOW_WAIT, FOLLOW)
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The longest wait for `--follow` to print a line or to end (it polls
/// every 200 ms).
const FOLLOW_WAIT: Duration = Duration::from_secs(10);

const FOLLOW: &str = "`orch runs events --follow`";

/// Lines come out while the run goes on: each event is written only once
/// the one before it has been printed, and the follow ends with the run.
#[test]
fn follow_prints_new_events_until_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    // This test stands for the orch that runs: it holds the run lock.
    let _lock = orch::store::RunLock::take(dir.path()).unwrap();
    let w = store.writer();
    let write = |records: Vec<orch::store::Record>| {
        for r in records {
            w.send(r).unwrap();
        }
        w.flush().unwrap();
    };
    let a = attempt("live", "p", "x", 1);
    let raw = |seq: u64, text: &str| a.event_of(seq, T0 + 1 + seq, "raw", "null", text);
    write(vec![
        run_started("live", std::process::id(), T0),
        phase_started("live", "p", T0),
        a.start(T0),
        raw(0, "first"),
    ]);

    let mut follow = Follower::spawn(dir.path(), "live");
    assert_eq!(follow.next_raw().as_deref(), Some("first"));
    follow.waits(Duration::from_millis(500));

    write(vec![raw(1, "second")]);
    assert_eq!(follow.next_raw().as_deref(), Some("second"));
    // The attempt and its phase end; the run goes on.
    write(vec![
        a.finish(Outcome::Succeeded, T0 + 3),
        phase_finished("live", "p", Outcome::Succeeded, 1, T0 + 3),
    ]);
    follow.waits(Duration::from_millis(500));

    // The last event and the run's end, in one commit.
    w.send(raw(2, "third")).unwrap();
    w.send(run_finished("live", RunStatus::Succeeded, T0 + 5))
        .unwrap();
    store.close().unwrap();
    assert_eq!(follow.next_raw().as_deref(), Some("third"));
    assert_eq!(follow.next_raw(), None, "nothing after the run's end");
    let o = follow.end();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn follow_ends_when_the_orch_running_the_run_died() {
    let dir = tempfile::tempdir().unwrap();
    dead_run(dir.path(), "orphan");
    let started_at = Instant::now();
    let child = support::orch()
        .args(["runs", "events", "orphan", "--follow"])
        .args(["--state-dir", dir.path().to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = finish_within(child, FOLLOW_WAIT, FOLLOW);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(started_at.elapsed() < Duration::from_secs(5));
    let o = runs(dir.path(), &["list", "--format", "json"]);
    let v = json_of(&o);
    assert_eq!(v[0]["status"], "interrupted");
}

#[test]
fn a_history_from_a_newer_orch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path()).unwrap().close().unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    conn.pragma_update(None, "user_version", 999).unwrap();
    drop(conn);
    let o = runs(dir.path(), &["list"]);
    assert_eq!(code(&o), 2);
    let err = flat_stderr(&o);
    assert!(err.contains("newer than this orch knows"), "{err}");
    assert!(err.contains("written by a newer orch"), "{err}");
}

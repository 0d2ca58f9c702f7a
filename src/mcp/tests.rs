//! The server through a real rmcp client, in process (over a duplex
//! pipe), against a real `state.db`: every tool, its argument rules, and
//! the scope.

use std::path::{Path, PathBuf};
use std::process::Command;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::{Caller, Judging, Ledger, OrchServer, schema_problems, sha256_hex};
use crate::store::{Reporter, Reports, Store};

struct Harness {
    client: RunningService<RoleClient, ()>,
    ws: PathBuf,
    state: PathBuf,
    ledger: std::sync::Arc<Ledger>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn caller(ws: &Path, state: &Path, tools: Option<&[&str]>) -> Caller {
    Caller {
        run: "r1".into(),
        phase: "plan".into(),
        agent: "claude".into(),
        attempt: 1,
        workspace: ws.to_path_buf(),
        tools: tools.map(|t| t.iter().map(|s| s.to_string()).collect()),
        judging: None,
        prompt: None,
        knowledge: vec!["README.md".into(), "docs/**/*.md".into()],
        marker: Some(state.join("workspace.json")),
        state_dir: state.to_path_buf(),
    }
}

async fn start(tools: Option<&[&str]>) -> Harness {
    start_as(tools, None).await
}

async fn start_as(tools: Option<&[&str]>, judging: Option<Judging>) -> Harness {
    let ws_dir = tempfile::tempdir().unwrap();
    let state_dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws_dir.path()).unwrap();
    let state = state_dir.path().to_path_buf();
    Store::open(&state).unwrap().close().unwrap();
    let mut who = caller(&ws, &state, tools);
    who.judging = judging;
    let reporter = Reporter {
        run_id: "r1".into(),
        phase: "plan".into(),
        agent: who.agent.clone(),
        attempt: 1,
    };
    let ledger = std::sync::Arc::new(Ledger::new());
    let server = OrchServer::new(
        who,
        Reports::open(&state, reporter).unwrap(),
        std::sync::Arc::clone(&ledger),
    );
    let (c, s) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(s).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(c).await.unwrap();
    Harness {
        client,
        ws,
        state,
        ledger,
        _dirs: (ws_dir, state_dir),
    }
}

impl Harness {
    /// (is it an error, its text)
    async fn call(&self, name: &str, args: Value) -> (bool, String) {
        let params = CallToolRequestParams::new(name.to_string())
            .with_arguments(args.as_object().cloned().unwrap_or_default());
        let r = self
            .client
            .call_tool(params)
            .await
            .expect("a tool result, not a protocol error");
        let v = serde_json::to_value(&r).unwrap();
        let text = v["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (r.is_error == Some(true), text)
    }

    async fn ok(&self, name: &str, args: Value) -> Value {
        let (err, text) = self.call(name, args).await;
        assert!(!err, "{name}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    async fn refused(&self, name: &str, args: Value) -> String {
        let (err, text) = self.call(name, args).await;
        assert!(err, "{name} should be refused: {text}");
        text
    }

    fn git(&self, args: &[&str]) {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&self.ws)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    fn write(&self, rel: &str, text: &str) -> String {
        let p = self.ws.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        sha256_hex(text.as_bytes())
    }

    fn rows(&self, kind: &str) -> Vec<Value> {
        let conn = rusqlite::Connection::open(self.state.join("state.db")).unwrap();
        let mut st = conn
            .prepare("SELECT run_id, phase, agent, attempt, data_json FROM reports WHERE kind = ?1 ORDER BY id")
            .unwrap();
        st.query_map([kind], |r| {
            Ok(
                json!({"run": r.get::<_, String>(0)?, "phase": r.get::<_, String>(1)?,
                      "agent": r.get::<_, String>(2)?, "attempt": r.get::<_, u32>(3)?,
                      "data": serde_json::from_str::<Value>(&r.get::<_, String>(4)?).unwrap()}),
            )
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }
}

#[tokio::test]
async fn every_tool_is_listed_with_a_schema_every_cli_accepts() {
    // A judge's endpoint: every tool, the verdicts included.
    let judging = Judging {
        phase: "plan".into(),
        artifact_path: "p.md".into(),
        artifact_hash: "0".repeat(64),
    };
    let h = start_as(None, Some(judging)).await;
    let tools = h.client.list_all_tools().await.unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(names, crate::catalog::ORCH_TOOLS);
    assert!(names.len() >= 19, "{names:?}");
    for t in &tools {
        let schema = Value::Object((*t.input_schema).clone());
        assert_eq!(schema_problems(&schema), Vec::<String>::new(), "{}", t.name);
        assert_eq!(schema["type"], "object", "{}", t.name);
        assert!(
            t.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{}",
            t.name
        );
        assert!("mcp__orch__".len() + t.name.len() <= 64, "{}", t.name);
        assert!(
            t.description.as_ref().is_some_and(|d| d.len() > 20),
            "{}",
            t.name
        );
    }
}

#[tokio::test]
async fn a_tool_outside_the_scope_is_neither_listed_nor_callable() {
    let h = start(Some(&["log_decision", "get_context"])).await;
    let names: Vec<String> = h
        .client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["get_context", "log_decision"]);
    let why = h
        .refused("start_task", json!({"name": "n", "goal": "g"}))
        .await;
    assert!(
        why.contains("not granted") && why.contains("mcp__orch__start_task"),
        "{why}"
    );
    assert!(h.rows("task_started").is_empty(), "nothing recorded");
    let why = h.refused("rm_rf", json!({})).await;
    assert!(why.contains("no tool `rm_rf`"), "{why}");
    h.ok("log_decision", json!({"category": "trade_off", "question": "q", "options_considered": ["a", "b"], "chosen": "a", "reasoning": "r"})).await;
    assert_eq!(h.rows("decision").len(), 1);
}

#[tokio::test]
async fn a_task_reports_the_files_it_really_changed() {
    let h = start(None).await;
    h.git(&["init", "-q"]);
    h.write("a.txt", "1");
    h.write("b.txt", "1");
    h.git(&["add", "."]);
    h.git(&["commit", "-qm", "one"]);
    let t = h
        .ok(
            "start_task",
            json!({"name": "edit", "goal": "change a", "areas": ["src"]}),
        )
        .await;
    let id = t["task_id"].as_i64().unwrap();
    assert_eq!(t["git_head"].as_str().unwrap().len(), 40);
    // One change committed, one in the working tree, one new file.
    h.write("a.txt", "2");
    h.git(&["commit", "-qam", "two"]);
    h.write("b.txt", "2");
    h.write("new/c.txt", "3");
    let done = h
        .ok(
            "complete_task",
            json!({"task_id": id, "status": "success",
            "outcome": {"summary": "done", "achievements": ["a"], "manual_review_needed": false},
            "metadata": {"tests_status": "passed"}}),
        )
        .await;
    assert_eq!(
        done["files_changed"],
        json!(["a.txt", "b.txt", "new/c.txt"])
    );
    assert!(done["duration_ms"].as_u64().is_some());
    let again = h
        .refused(
            "complete_task",
            json!({"task_id": id, "status": "failed", "outcome": {"summary": "x"}}),
        )
        .await;
    assert!(again.contains("already complete"), "{again}");
    let unknown = h
        .refused(
            "complete_task",
            json!({"task_id": 999, "status": "failed", "outcome": {"summary": "x"}}),
        )
        .await;
    assert!(unknown.contains("no task 999"), "{unknown}");
    let row = &h.rows("task_completed")[0];
    assert_eq!(
        (
            row["run"].as_str(),
            row["phase"].as_str(),
            row["attempt"].as_u64()
        ),
        (Some("r1"), Some("plan"), Some(1))
    );
}

#[tokio::test]
async fn outside_git_a_task_says_so_and_still_completes() {
    let h = start(None).await;
    let t = h.ok("start_task", json!({"name": "n", "goal": "g"})).await;
    assert!(t["note"].as_str().unwrap().contains("not a git repository"));
    let done = h.ok("complete_task", json!({"task_id": t["task_id"], "status": "partial_success", "outcome": {"summary": "s"}})).await;
    assert_eq!(done["files_changed"], Value::Null);
    assert!(
        done["note"]
            .as_str()
            .unwrap()
            .contains("not a git repository")
    );
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_that_say_what_to_change() {
    let h = start(None).await;
    let wrong_enum = h.refused("log_decision", json!({"category": "vibes", "question": "q", "options_considered": [], "chosen": "a", "reasoning": "r"})).await;
    assert!(wrong_enum.contains("vibes"), "{wrong_enum}");
    let missing = h
        .refused("log_decision", json!({"category": "other"}))
        .await;
    assert!(missing.contains("question"), "{missing}");
    let wrong_type = h
        .refused("log_milestone", json!({"message": "m", "progress": "half"}))
        .await;
    assert!(
        wrong_type.contains("progress") || wrong_type.contains("integer"),
        "{wrong_type}"
    );
    let range = h
        .refused("log_milestone", json!({"message": "m", "progress": 101}))
        .await;
    assert!(range.contains("from 0 to 100"), "{range}");
    let unknown_field = h
        .refused("add_comment", json!({"text": "t", "txet": "t"}))
        .await;
    assert!(unknown_field.contains("txet"), "{unknown_field}");
    let huge = h
        .refused("add_comment", json!({"text": "x".repeat(20_001)}))
        .await;
    assert!(huge.contains("20001 characters"), "{huge}");
    let empty = h.refused("add_comment", json!({"text": "   "})).await;
    assert!(empty.contains("empty"), "{empty}");
    let no_task = h.refused("log_issue", json!({"task_id": 5, "type": "bug_encountered", "description": "d", "requires_human_review": true})).await;
    assert!(no_task.contains("no task 5"), "{no_task}");
    assert!(
        h.rows("comment").is_empty()
            && h.rows("blocker").is_empty()
            && h.rows("decision").is_empty()
    );
}

#[tokio::test]
async fn a_phase_claim_is_checked_against_the_file() {
    let h = start(None).await;
    let body = format!("# Plan\n\n{}\n", "Step one, then step two. ".repeat(5));
    let hash = h.write("docs/plan.md", &body);
    let claim = |path: &str, hash: &str| json!({"artifact_path": path, "artifact_hash": hash, "summary": "s", "confidence": "high"});
    let wrong = h
        .refused("complete_phase", claim("docs/plan.md", &"0".repeat(64)))
        .await;
    assert!(wrong.contains(&hash), "says the real hash: {wrong}");
    let short_hash = h.write("short.md", "no heading");
    let short = h
        .refused("complete_phase", claim("short.md", &short_hash))
        .await;
    assert!(
        short.contains("at least 100") && short.contains("heading"),
        "{short}"
    );
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("s.md"), &body).unwrap();
    std::os::unix::fs::symlink(outside.path().join("s.md"), h.ws.join("link.md")).unwrap();
    for (path, says) in [
        ("../x.md", ".."),
        ("/etc/passwd", "absolute"),
        ("link.md", "link"),
        ("nope.md", "cannot open"),
    ] {
        let why = h.refused("complete_phase", claim(path, &hash)).await;
        assert!(why.contains(says), "{path}: {why}");
    }
    let latin1 = b"# Plan\n\xe9t\xe9 ".repeat(20);
    std::fs::write(h.ws.join("latin1.md"), &latin1).unwrap();
    let not_utf8 = h
        .refused("complete_phase", claim("latin1.md", &sha256_hex(&latin1)))
        .await;
    assert!(not_utf8.contains("not UTF-8"), "{not_utf8}");
    let ok = h
        .ok(
            "complete_phase",
            claim("./docs/plan.md", &hash.to_uppercase()),
        )
        .await;
    assert_eq!(ok["artifact_path"], "docs/plan.md");
    // Refused claims of a readable file are kept (the engine reads them),
    // marked as such; a path orch refused outright leaves nothing.
    let claims = h.rows("claim");
    let accepted: Vec<_> = claims
        .iter()
        .map(|c| c["data"]["accepted"].clone())
        .collect();
    assert_eq!(
        accepted,
        [json!(false), json!(false), json!(false), json!(true)],
        "{claims:?}"
    );
    assert_eq!(claims[0]["data"]["actual_hash"], hash.as_str());

    // What reached the engine: the same four claims, in order.
    let ledger = h.ledger.claims("plan");
    assert_eq!(
        ledger
            .iter()
            .map(|c| c.refused.is_none())
            .collect::<Vec<_>>(),
        [false, false, false, true]
    );
    // A worker has no verdict tool, whatever its scope says.
    let verdict = |hash: &str| json!({"phase": "plan", "artifact_hash": hash, "reason": "complete", "fix_instructions": "none"});
    let not_a_judge = h.refused("approve_phase", verdict(&hash)).await;
    assert!(not_a_judge.contains("only for a judge"), "{not_a_judge}");
    assert!(h.rows("verdict").is_empty());
}

#[tokio::test]
async fn a_judge_gives_its_verdict_on_the_one_claim_it_judges() {
    let hash = sha256_hex(b"the artifact");
    let judging = Judging {
        phase: "plan".into(),
        artifact_path: "docs/plan.md".into(),
        artifact_hash: hash.clone(),
    };
    let h = start_as(Some(&["log_decision"]), Some(judging)).await;
    let listed: Vec<String> = h
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(listed, ["approve_phase", "log_decision", "reject_phase"]);
    let verdict = |phase: &str, hash: &str| json!({"phase": phase, "artifact_hash": hash, "reason": "complete", "fix_instructions": "none"});
    let wrong_hash = h
        .refused("approve_phase", verdict("plan", &"1".repeat(64)))
        .await;
    assert!(
        wrong_hash.contains(&hash),
        "names the hash it judges: {wrong_hash}"
    );
    let wrong_phase = h.refused("reject_phase", verdict("build", &hash)).await;
    assert!(
        wrong_phase.contains("you judge phase `plan`"),
        "{wrong_phase}"
    );
    h.ok("approve_phase", verdict("plan", &hash)).await;
    h.ok("reject_phase", verdict("plan", &hash)).await;
    h.ok("approve_phase", verdict("plan", &hash)).await;
    let v = h.rows("verdict");
    assert_eq!(
        (
            v[0]["data"]["approved"].as_bool(),
            v[1]["data"]["approved"].as_bool()
        ),
        (Some(true), Some(false))
    );
    // The engine takes the rejection: approvals around it do not overrule
    // it, whoever gave them.
    let taken = h.ledger.verdict_of("plan", "claude", 1, &hash).unwrap();
    assert!(!taken.approved);
    assert_eq!(taken.fix, "none");
    assert!(h.ledger.verdict_of("plan", "claude", 2, &hash).is_none());
}

#[tokio::test]
async fn learnings_have_quality_gates_and_are_found_again() {
    let h = start(None).await;
    let pattern = "Set the SQLite busy timeout on every connection, not just the writer's one";
    let short = h
        .refused(
            "add_learning",
            json!({"pattern": "too short", "learning_type": "gotcha"}),
        )
        .await;
    assert!(short.contains("at least 50"), "{short}");
    let ctx = h
        .refused(
            "add_learning",
            json!({"pattern": pattern, "context": "brief", "learning_type": "gotcha"}),
        )
        .await;
    assert!(ctx.contains("at least 100"), "{ctx}");
    let added = h
        .ok(
            "add_learning",
            json!({"pattern": pattern, "learning_type": "gotcha", "applies_to": "rust"}),
        )
        .await;
    assert_eq!(added["quality_score"], 50);
    let dup = h.refused("add_learning", json!({"pattern": pattern.to_uppercase().replace(',', " ;"), "learning_type": "pattern"})).await;
    assert!(dup.contains("already recorded"), "{dup}");
    let found = h
        .ok("search_learnings", json!({"query": "busy timeout"}))
        .await;
    assert_eq!(found["learnings"][0]["pattern"], pattern);
    let none = h
        .ok(
            "search_learnings",
            json!({"query": "busy", "min_quality_score": 60}),
        )
        .await;
    assert_eq!(none["learnings"], json!([]));
    h.refused("search_learnings", json!({"query": "x", "limit": 51}))
        .await;
}

#[tokio::test]
async fn findings_comments_followups_health_memory_and_the_phase() {
    let h = start(None).await;
    h.ok(
        "add_finding",
        json!({"category": "bug", "summary": "off by one", "files": ["src/a.rs"]}),
    )
    .await;
    h.ok("add_comment", json!({"text": "looks fine"})).await;
    h.ok(
        "create_followup",
        json!({"title": "t", "description": "d", "priority": 2, "labels": ["x"]}),
    )
    .await;
    h.refused(
        "create_followup",
        json!({"title": "t", "description": "d", "priority": 5}),
    )
    .await;
    let list = h.ok("list_followups", json!({})).await;
    assert_eq!(list["followups"][0]["data"]["priority"], 2);
    h.ok("record_test_health", json!({"framework": "cargo test", "passed": 3, "failed": 0, "skipped": 1, "duration_ms": 1200})).await;
    h.refused(
        "record_test_health",
        json!({"framework": "f", "passed": -1, "failed": 0, "skipped": 0, "duration_ms": 0}),
    )
    .await;
    let phase = h.ok("get_phase", json!({})).await;
    assert_eq!(phase["phase"], "plan");
    assert_eq!(phase["findings"][0]["data"]["summary"], "off by one");
    assert_eq!(phase["comments"][0]["data"]["text"], "looks fine");

    let bad = h
        .refused(
            "update_memory",
            json!({"scope": "project", "file": "../escape.md", "content": "x"}),
        )
        .await;
    assert!(bad.contains("not a memory file name"), "{bad}");
    h.refused(
        "update_memory",
        json!({"scope": "global", "file": "a.md", "content": "x".repeat(10_001)}),
    )
    .await;
    let m = h
        .ok(
            "update_memory",
            json!({"scope": "project", "file": "testing.md", "content": "run nextest"}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(m["path"].as_str().unwrap()).unwrap(),
        "run nextest"
    );
    assert!(Path::new(m["path"].as_str().unwrap()).starts_with(&h.state));

    let ctx = h
        .ok(
            "get_context",
            json!({"include": ["phase_summary", "blockers"]}),
        )
        .await;
    assert_eq!(ctx["phase_summary"]["records"]["finding"], 1);
    assert!(ctx.get("tasks").is_none());
    let events = h.ok("query_run_events", json!({"limit": 500})).await;
    assert_eq!(events["events"], json!([]));
    h.refused("query_run_events", json!({"limit": 501})).await;
}

#[tokio::test]
async fn search_knowledge_finds_sections_of_the_project_documents_as_they_are_now() {
    let h = start(None).await;
    h.write(
        "README.md",
        "# orch\nRuns pipelines.\n## Install\nUse cargo install.\n",
    );
    h.write(
        "docs/ops/deploy.md",
        "# Deploying\nWe ship with a blue-green rollout on Fridays.\n",
    );
    h.write("docs/.hidden.md", "# Hidden\nrollout secrets\n");
    h.write("notes/rollout.md", "# Not named by the patterns\nrollout\n");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("x.md"), "# Outside\nrollout\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("x.md"), h.ws.join("docs/link.md")).unwrap();

    let found = h.ok("search_knowledge", json!({"query": "rollout"})).await;
    let hits = found["results"].as_array().unwrap();
    assert_eq!(
        hits.len(),
        1,
        "only docs/**/*.md and README.md inside the workspace: {found}"
    );
    assert_eq!(hits[0]["path"], "docs/ops/deploy.md");
    assert_eq!(hits[0]["heading"], "Deploying");
    assert!(hits[0]["snippet"].as_str().unwrap().contains("[rollout]"));
    assert_eq!(found["documents"], 2);
    assert_eq!(found["reindexed"], 2);
    let install = h
        .ok(
            "search_knowledge",
            json!({"query": "cargo install", "limit": 1}),
        )
        .await;
    assert_eq!(install["results"][0]["heading"], "Install");
    assert_eq!(
        install["reindexed"], 0,
        "unchanged files are not read again"
    );

    // Edited: found as it is now.
    h.write(
        "docs/ops/deploy.md",
        "# Deploying\nWe ship with canary releases.\n",
    );
    let now = h
        .ok("search_knowledge", json!({"query": "rollout canary"}))
        .await;
    assert_eq!(now["reindexed"], 1);
    let hits = now["results"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{now}");
    assert!(hits[0]["snippet"].as_str().unwrap().contains("[canary]"));

    assert!(
        h.refused("search_knowledge", json!({"query": " "}))
            .await
            .contains("query")
    );
    assert!(
        h.refused("search_knowledge", json!({"query": "x", "limit": 0}))
            .await
            .contains("limit")
    );
}

/// `search_knowledge` in a workspace an agent shaped against it (links
/// back to `docs`, megabytes of documents) on a runtime of one thread:
/// while a search reads, hashes and indexes, the runtime's thread stays
/// free (a timer on it keeps its time), since the work runs on the
/// blocking pool; and eight calls at once all end.
#[tokio::test]
async fn search_knowledge_works_off_the_runtime_and_ends_in_a_loop_of_links() {
    use std::time::{Duration, Instant};
    let h = start(None).await;
    h.write("docs/a.md", "# Deploying\nA blue-green rollout.\n");
    for l in ["l1", "l2", "l3"] {
        std::os::unix::fs::symlink(".", h.ws.join("docs").join(l)).unwrap();
    }
    let big = "# Notes\nplain words without the query term\n".repeat(20_000);
    for i in 0..3 {
        h.write(&format!("docs/notes/{i:02}.md"), &big);
    }
    let search = |peer: rmcp::Peer<RoleClient>| async move {
        let params = CallToolRequestParams::new("search_knowledge")
            .with_arguments(json!({"query": "rollout"}).as_object().cloned().unwrap());
        let r = tokio::time::timeout(Duration::from_secs(120), peer.call_tool(params))
            .await
            .expect("the search ends")
            .unwrap();
        let text = serde_json::to_value(&r).unwrap()["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["documents"], 4, "{v}");
        assert_eq!(v["results"][0]["path"], "docs/a.md", "{v}");
    };

    // When the runtime's thread was free to tick while the first search
    // (which indexes every document) ran: the longest it was away.
    let ticks = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let ticking = {
        let ticks = std::sync::Arc::clone(&ticks);
        tokio::spawn(async move {
            loop {
                ticks.lock().unwrap().push(Instant::now());
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = Instant::now();
    search(h.client.peer().clone()).await;
    let ended = Instant::now();
    ticking.abort();
    let mut during: Vec<Instant> = ticks.lock().unwrap().clone();
    during.retain(|t| *t > started);
    during.insert(0, started);
    during.push(ended);
    let gap = during.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    let took = ended - started;
    assert!(
        gap < took / 2,
        "the runtime's thread was held {gap:?} of the search's {took:?}"
    );

    let calls: Vec<_> = (0..8)
        .map(|_| tokio::spawn(search(h.client.peer().clone())))
        .collect();
    for call in calls {
        call.await.unwrap();
    }
}

#[tokio::test]
async fn verify_workspace_checks_the_marker_and_where_the_agent_is() {
    let h = start(None).await;
    let marker = h.state.join("workspace.json");
    let no_marker = h
        .refused(
            "verify_workspace",
            json!({"path": h.ws.display().to_string()}),
        )
        .await;
    assert!(
        no_marker.contains("missing") && no_marker.contains("cd "),
        "{no_marker}"
    );
    let mut good = json!({"run": "r1", "phase": "plan", "agent": "claude", "attempt": 1,
                          "workspace": h.ws});
    std::fs::write(&marker, good.to_string()).unwrap();
    h.write("src/lib.rs", "");
    let ok = h
        .ok(
            "verify_workspace",
            json!({"path": h.ws.join("src").display().to_string()}),
        )
        .await;
    assert_eq!(ok["valid"], true);
    assert_eq!(ok["workspace"], h.ws.display().to_string());
    let away = tempfile::tempdir().unwrap();
    let why = h
        .refused(
            "verify_workspace",
            json!({"path": away.path().display().to_string()}),
        )
        .await;
    assert!(
        why.contains("outside your workspace") && why.contains(&format!("cd {}", h.ws.display())),
        "{why}"
    );
    good["attempt"] = json!(2);
    std::fs::write(&marker, good.to_string()).unwrap();
    let stale = h
        .refused(
            "verify_workspace",
            json!({"path": h.ws.display().to_string()}),
        )
        .await;
    assert!(stale.contains("not this attempt"), "{stale}");
}

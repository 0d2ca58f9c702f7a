//! What an agent is told: `orch prompt` shows the system prompt's layers
//! (workspace boundary, profile, contract, the project's instructions,
//! convention learnings) and the task, with their sizes; a profile can
//! leave layers out.

use std::path::Path;

use serde_json::Value;

use crate::support::{json_of, orch, stderr, write};

fn prompt_json(ws: &Path, agent: &str) -> Value {
    let out = orch()
        .current_dir(ws)
        .args([
            "--state-dir",
            ".orch",
            "prompt",
            "p.toml",
            "--phase",
            "review",
            "--agent",
            agent,
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    json_of(&out)
}

/// A learning in the run history, as `add_learning` leaves it.
fn learn(ws: &Path, kind: &str, pattern: &str) {
    let db = ws.join(".orch/state.db");
    // The history exists once orch opened it.
    if !db.exists() {
        let out = orch()
            .current_dir(ws)
            .args(["--state-dir", ".orch", "runs", "list"])
            .output()
            .unwrap();
        assert!(out.status.success());
        write(
            ws,
            "seed.toml",
            "version = 1\nname = \"s\"\n[agents.t]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"s\"\nagents = [\"t\"]\n",
        );
        let out = orch()
            .current_dir(ws)
            .args(["--state-dir", ".orch", "run", "seed.toml"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "INSERT INTO learnings (run_id, phase, agent, attempt, ts_ms, learning_type, pattern, context, applies_to, quality, normalized)
         VALUES ('r', 'p', 'a', 1, 0, ?1, ?2, '', '', 50, ?2)",
        [kind, pattern],
    )
    .unwrap();
    let id = conn.last_insert_rowid();
    conn.execute(
        "INSERT INTO learnings_fts (rowid, pattern, context, applies_to) VALUES (?1, ?2, '', '')",
        rusqlite::params![id, pattern],
    )
    .unwrap();
}

#[test]
fn the_system_prompt_is_in_layers_in_order_with_their_sizes() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    write(
        ws.path(),
        "profiles/reviewer.md",
        "---\ntools: Read, Grep\n---\nYou review diffs.\n",
    );
    write(
        ws.path(),
        "profiles/quiet.md",
        "---\ntools: Read\nomit: [learnings, instructions]\n---\nYou judge quietly.\n",
    );
    write(
        ws.path(),
        "orch.toml",
        "[instructions]\n\"*\" = \"Keep answers short.\"\nreviewer = \"Quote the file and line of every problem in the review.\"\n",
    );
    write(
        ws.path(),
        "p.toml",
        "version = 1\nname = \"p\"\n[[phases]]\nname = \"review\"\nagents = [\"claude\", \"codex\"]\nmode = \"audit\"\nprofile = \"reviewer\"\nprompt = \"Review the diff of the rollout code.\"\nartifact = \"out/{run}-{phase}.md\"\nrequired_sections = [\"Findings\"]\n",
    );
    learn(
        ws.path(),
        "convention",
        "Every rollout change needs a feature flag that defaults to off in production",
    );
    learn(
        ws.path(),
        "gotcha",
        "The rollout tests are flaky on Mondays because of the timezone fixture",
    );
    let v = prompt_json(ws.path(), "claude");
    let names: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "boundary",
            "profile",
            "contract",
            "instructions",
            "learnings"
        ],
        "{v:#}"
    );
    let layer = |n: &str| {
        v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == n)
            .unwrap()["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let ws_real = std::fs::canonicalize(ws.path()).unwrap();
    assert!(layer("boundary").contains(&format!("`{}`", ws_real.display())));
    assert_eq!(layer("profile"), "You review diffs.");
    assert!(
        layer("contract").contains("`out/<run>-review.md`")
            && layer("contract").contains("`## Findings`")
    );
    assert_eq!(
        layer("instructions"),
        "Quote the file and line of every problem in the review."
    );
    let learned = layer("learnings");
    assert!(learned.contains("feature flag"), "{learned}");
    assert!(!learned.contains("flaky"), "conventions only: {learned}");
    // Sizes: 4 characters a token.
    let system = v["system"].as_str().unwrap();
    assert_eq!(v["system_tokens"], system.chars().count().div_ceil(4));
    assert_eq!(v["user"], "Review the diff of the rollout code.");
    assert_eq!(v["user_tokens"], 9);

    // A profile that does without the optional layers.
    write(
        ws.path(),
        "p.toml",
        &std::fs::read_to_string(ws.path().join("p.toml"))
            .unwrap()
            .replace("reviewer", "quiet"),
    );
    let v = prompt_json(ws.path(), "claude");
    let names: Vec<&str> = v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["boundary", "profile", "contract"]);
    assert_eq!(
        v["omitted"],
        serde_json::json!(["learnings", "instructions"])
    );

    // What `orch prompt` shows is what the CLI gets (Claude Code: a file).
    let out = orch()
        .current_dir(ws.path())
        .args([
            "--state-dir",
            ".orch",
            "explain",
            "p.toml",
            "--phase",
            "review",
            "--agent",
            "claude",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let inv = &json_of(&out)["invocations"][0];
    let sent = inv["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("system-prompt.md"))
        .unwrap()["content"]
        .clone();
    assert_eq!(sent, v["system"]);
}

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
        "version = 1\nname = \"p\"\n[[phases]]\nname = \"review\"\nagents = [\"claude\", \"codex\"]\nmode = \"audit\"\nprofile = \"reviewer\"\nprompt = \"Review the diff of the rollout code.\"\nartifact = \"out/{run}-{phase}.md\"\nrequired_sections = [\"Findings\"]\n\
         [phases.tools]\ninternal = [\"Read\", \"Glob\", \"Grep\", \"Write\", \"Edit\", \"Bash\"]\npermission = \"workspace-write\"\n",
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
    // The task, then the context: here the gotcha (a tactical learning:
    // its words match the task's).
    let user = v["user"].as_str().unwrap();
    assert_eq!(
        user,
        "Review the diff of the rollout code.\n\n## Learnings that may apply\n\n- The rollout tests are flaky on Mondays because of the timezone fixture"
    );
    assert_eq!(v["user_tokens"], user.chars().count().div_ceil(4));
    assert_eq!(v["sections"][0]["name"], "learnings");
    assert_eq!(v["sections"][0]["truncated"], false);

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

#[test]
fn the_task_carries_the_runs_context_within_its_budget() {
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        "p.toml",
        "version = 1\nname = \"p\"\ndescription = \"Ship the login fix without breaking sessions.\"\n\
         [agents.planner]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", \"printf '# Plan\\\\n\\\\n## Steps\\\\n\\\\nPatch the session check.\\\\n' > plan.md\"]\n\
         [[phases]]\nname = \"plan\"\nagents = [\"planner\"]\nartifacts = [\"plan.md\"]\n\
         [[phases]]\nname = \"review\"\nagents = [\"claude\"]\ndepends_on = [\"plan\"]\nmode = \"audit\"\nprompt = \"Review the plan.\"\n",
    );
    // The review's first attempt fails (`/bin/true` as Claude Code).
    let out = orch()
        .current_dir(ws.path())
        .args([
            "--state-dir",
            ".orch",
            "--agent-binary",
            "claude=/bin/true",
            "run",
            "p.toml",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let conn = rusqlite::Connection::open(ws.path().join(".orch/state.db")).unwrap();
    let run: String = conn
        .query_row("SELECT run_id FROM runs", [], |r| r.get(0))
        .unwrap();
    for i in 1..=7 {
        conn.execute(
            "INSERT INTO reports (run_id, phase, agent, attempt, ts_ms, kind, data_json)
             VALUES (?1, 'review', 'claude', 1, ?2, 'finding', ?3)",
            rusqlite::params![
                run,
                i,
                format!(r#"{{"category": "bug", "summary": "finding {i}"}}"#)
            ],
        )
        .unwrap();
    }
    conn.execute(
        "INSERT INTO reports (run_id, phase, agent, attempt, ts_ms, kind, data_json)
         VALUES (?1, 'review', 'claude', 1, 9, 'comment', '{\"text\": \"check the expiry path\"}')",
        [&run],
    )
    .unwrap();
    let out = orch()
        .current_dir(ws.path())
        .args([
            "--state-dir",
            ".orch",
            "prompt",
            "p.toml",
            "--phase",
            "review",
            "--agent",
            "claude",
        ])
        .args(["--run", "latest", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json_of(&out);
    let sections: Vec<(String, String)> = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().into(),
                s["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    let names: Vec<&str> = sections.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "description",
            "artifacts",
            "findings",
            "comments",
            "previous attempts"
        ]
    );
    assert_eq!(
        sections[0].1,
        "Ship the login fix without breaking sessions."
    );
    assert_eq!(
        sections[1].1,
        "### plan (plan.md)\n\n# Plan\n\n## Steps\n\nPatch the session check.\n"
    );
    // The last five findings, oldest first.
    let findings: Vec<&str> = sections[2].1.lines().collect();
    assert_eq!(findings.len(), 5);
    assert_eq!(findings[0], "- [bug] finding 3 (review/claude)");
    assert_eq!(findings[4], "- [bug] finding 7 (review/claude)");
    assert_eq!(sections[3].1, "- check the expiry path (review/claude)");
    assert!(
        sections[4].1.starts_with("- attempt 1 of claude: failed: claude exited with status 0 without its final result event"),
        "{}",
        sections[4].1
    );
    let user = v["user"].as_str().unwrap();
    assert!(
        user.starts_with("Review the plan.\n\n## What this pipeline is for\n\n"),
        "{user}"
    );
}

#[test]
fn orch_prompt_prints_what_is_sent() {
    // pipelines/judged-fix.toml, from a copy outside any git repository
    // (no branch in the boundary), its workspace path filtered out.
    let ws = tempfile::tempdir().unwrap();
    let root = crate::support::root();
    std::fs::create_dir(ws.path().join("profiles")).unwrap();
    std::fs::copy(
        root.join("profiles/worker.md"),
        ws.path().join("profiles/worker.md"),
    )
    .unwrap();
    std::fs::copy(
        root.join("pipelines/judged-fix.toml"),
        ws.path().join("p.toml"),
    )
    .unwrap();
    let text = |agent: &str| {
        let out = orch()
            .current_dir(ws.path())
            .args([
                "--state-dir",
                ".orch",
                "prompt",
                "p.toml",
                "--phase",
                "implement",
            ])
            .args(["--agent", agent, "--input", "ticket=BUG-7"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let real = std::fs::canonicalize(ws.path()).unwrap();
        // The workspace's path (and so the sizes that include it) differs
        // from machine to machine.
        crate::support::stdout(&out)
            .replace(&real.display().to_string(), "<workspace>")
            .lines()
            .map(|l| {
                if l.starts_with("system prompt (") || l.starts_with("--- boundary (") {
                    l.replace(|c: char| c.is_ascii_digit(), "N")
                        .replace("NN", "N")
                        .replace("NN", "N")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    insta::assert_snapshot!("prompt_worker", text("claude"));
    insta::assert_snapshot!("prompt_judge", text("tests"));
}

#[test]
fn the_budget_is_a_setting() {
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        "p.toml",
        &format!(
            "version = 1\nname = \"p\"\ndescription = \"{}\"\n[[phases]]\nname = \"review\"\nagents = [\"claude\"]\nmode = \"audit\"\nprompt = \"Review.\"\n",
            "word ".repeat(400)
        ),
    );
    let description = |env: &[(&str, &str)]| {
        let out = orch()
            .current_dir(ws.path())
            .envs(env.iter().copied())
            .args([
                "--state-dir",
                ".orch",
                "prompt",
                "p.toml",
                "--phase",
                "review",
            ])
            .args(["--agent", "claude", "--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        json_of(&out)["sections"][0].clone()
    };
    // 2,000 characters fit in 25% of 8,000 tokens; not in 25% of 400.
    assert_eq!(description(&[])["truncated"], false);
    let cut = description(&[("ORCH_PROMPT_TOKENS", "400")]);
    assert_eq!(cut["truncated"], true);
    assert_eq!(cut["text"].as_str().unwrap().chars().count(), 400);
    assert!(
        cut["text"]
            .as_str()
            .unwrap()
            .starts_with("...(truncated)\n")
    );
}

/// orch runs git itself, unconfined, for a judge's prompt (the diff of
/// the workspace). A folder of the workspace on orch's `PATH` (an
/// activated `.venv/bin`) may hold a `git` an agent put there: orch never
/// takes its git from a folder inside the one it runs in. The control: the
/// real git's diff is in the prompt.
#[test]
fn orchs_git_is_never_one_from_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    let d = ws.path();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.email=a@b", "-c", "user.name=a"])
            .args(args)
            .current_dir(d)
            .env_remove("GIT_DIR")
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    write(d, "a.txt", "before\n");
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "i"]);
    write(d, "a.txt", "after-the-change\n");
    let marker = d.join("planted-git-ran");
    let real = which::which("git").unwrap();
    write(
        d,
        ".venv/bin/git",
        &format!(
            "#!/bin/sh\ntouch '{}'\nexec '{}' \"$@\"\n",
            marker.display(),
            real.display()
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        d.join(".venv/bin/git"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(
        d,
        "p.toml",
        "version = 1\nname = \"j\"\n\
         [agents.writer]\nkind = \"command\"\ncommand = [\"true\"]\n\
         [agents.judge]\nkind = \"claude\"\n\
         [[phases]]\nname = \"change\"\nagents = [\"writer\"]\nprompt = \"x\"\n\
         artifact = \"out/{phase}-{run}.md\"\njudge = \"judge\"\n",
    );
    let path = format!(
        "{}:{}",
        d.join(".venv/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The judge's prompt from `at`, with its diff (the real git's).
    let judges_prompt = |at: &std::path::Path, up: &str| {
        let out = orch()
            .current_dir(at)
            .env("PATH", &path)
            .arg("--state-dir")
            .arg(format!("{up}.orch"))
            .args(["prompt", &format!("{up}p.toml"), "--phase", "change"])
            .args(["--agent", "judge"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = crate::support::stdout(&out);
        assert!(text.contains("+after-the-change"), "{text}");
    };
    judges_prompt(d, "");
    assert!(!marker.exists(), "orch ran the workspace's git");
    // Run from a folder of the repository: its `.venv/bin` is passed over
    // too.
    std::fs::create_dir(d.join("sub")).unwrap();
    judges_prompt(&d.join("sub"), "../");
    assert!(!marker.exists(), "orch ran the repository's git");
}

//! Phase contracts through `orch run`, with plain-command workers and
//! judges (so `cargo test` could be the judge of a fix phase): the
//! structural check, trust, the judge loop (approve; reject then
//! approve, the rejection in the next prompt; reject until max_attempts),
//! and no artifact longer than a judge is shown.

use std::path::Path;

use serde_json::Value;

use crate::support::{orch, stderr, write};

/// A worker that keeps each prompt it gets (`prompt-<n>.txt`) and writes
/// the contract's artifact `out/plan-<run>.md` (the run id is the prompt's
/// first line) with `$BODY`.
const WORKER: &str = r#"n=$(ls prompt-*.txt 2>/dev/null | wc -l); n=$((n+1)); cp "$ORCH_PROMPT_FILE" prompt-$n.txt; run=$(head -n1 "$ORCH_PROMPT_FILE"); mkdir -p out; printf '%b' "$BODY" > "out/plan-$run.md""#;

/// A judge command that rejects (with a fix on its output) until its
/// `n`th run.
fn judge_approving_at(n: u32) -> String {
    format!(
        r#"k=$(cat judged 2>/dev/null || echo 0); k=$((k+1)); echo $k > judged; [ $k -ge {n} ] && exit 0; echo "running 3 tests"; echo "test plan_has_rollback ... FAILED: add a Rollback step" >&2; exit 1"#
    )
}

fn pipeline(body: &str, judge: &str, contract: &str) -> String {
    format!(
        "version = 1\nname = \"c\"\n\
         [agents.worker]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {WORKER:?}]\nenv = {{ BODY = {body:?} }}\n\
         [agents.tests]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {judge:?}]\n\
         [[phases]]\nname = \"plan\"\nagents = [\"worker\"]\nprompt = \"{{{{run_id}}}}\\nWrite the plan.\"\n\
         artifact = \"out/{{phase}}-{{run}}.md\"\n{contract}"
    )
}

fn run(ws: &Path, text: &str) -> (std::process::Output, Value) {
    write(ws, "p.toml", text);
    let out = orch()
        .current_dir(ws)
        .args(["--state-dir", ".orch", "run", "p.toml", "--format", "json"])
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, v)
}

const GOOD: &str = "# Plan\\n\\n## Steps\\n\\n1. Do it.\\n\\n## Risks\\n\\nNone.\\n";

#[test]
fn the_structural_check_holds_the_artifact_to_its_sections_and_trust_only_warns() {
    let ws = tempfile::tempdir().unwrap();
    let sections = "required_sections = [\"Steps\", \"Risks\"]\n";
    let (out, v) = run(ws.path(), &pipeline(GOOD, "true", sections));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(v["phases"][0]["status"], "succeeded");

    let thin = "# Plan\\n\\n## Steps\\n\\n1. Do it.\\n";
    let (out, v) = run(ws.path(), &pipeline(thin, "true", sections));
    assert_eq!(out.status.code(), Some(1));
    let reason = v["phases"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("lacks the required section `## Risks`"),
        "{reason}"
    );

    let trusting = format!("{sections}validation = \"trust\"\n");
    let (out, v) = run(ws.path(), &pipeline(thin, "true", &trusting));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(v["phases"][0]["status"], "succeeded");
    assert!(
        stderr(&out).contains("warning (validation = \"trust\")")
            && stderr(&out).contains("## Risks"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_command_judge_approves() {
    let ws = tempfile::tempdir().unwrap();
    let (out, v) = run(
        ws.path(),
        &pipeline(GOOD, &judge_approving_at(1), "judge = \"tests\"\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let phase = &v["phases"][0];
    assert_eq!(phase["status"], "succeeded");
    let agents: Vec<(&str, u64)> = phase["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap(),
                a["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(agents, [("worker", 1), ("tests", 1)]);
    // The judge got the artifact in its prompt.
    assert!(
        stderr(&out).contains("judge tests approved round 1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_rejection_feeds_the_next_round_until_the_judge_approves() {
    let ws = tempfile::tempdir().unwrap();
    let (out, v) = run(
        ws.path(),
        &pipeline(GOOD, &judge_approving_at(2), "judge = \"tests\"\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let phase = &v["phases"][0];
    assert_eq!(phase["status"], "succeeded");
    assert_eq!(phase["agents"][0]["attempts"], 2, "{phase}");
    assert_eq!(phase["agents"][1]["attempts"], 2, "{phase}");
    let first = std::fs::read_to_string(ws.path().join("prompt-1.txt")).unwrap();
    let second = std::fs::read_to_string(ws.path().join("prompt-2.txt")).unwrap();
    assert!(!first.contains("rejected"), "{first}");
    assert!(
        second.contains("## Your previous attempt was rejected")
            && second.contains("exited with status 1")
            && second.contains("### Fix instructions")
            && second.contains("add a Rollback step"),
        "{second}"
    );
    // The record numbers every attempt: worker 1, 2 and judge 1, 2.
    let shown = orch()
        .current_dir(ws.path())
        .args([
            "--state-dir",
            ".orch",
            "runs",
            "show",
            "latest",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    // The contract's artifact is recorded with the phase.
    let artifacts = shown["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 1, "{shown}");
    assert!(
        artifacts[0]["path"]
            .as_str()
            .unwrap()
            .starts_with("out/plan-")
    );
    let attempts: Vec<(String, u64)> = shown["phases"][0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent"].as_str().unwrap().to_string(),
                a["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            ("worker".into(), 1),
            ("tests".into(), 1),
            ("worker".into(), 2),
            ("tests".into(), 2)
        ]
    );
}

#[test]
fn a_judge_that_keeps_rejecting_fails_the_phase_after_max_attempts() {
    let ws = tempfile::tempdir().unwrap();
    let (out, v) = run(
        ws.path(),
        &pipeline(
            GOOD,
            &judge_approving_at(99),
            "judge = \"tests\"\nmax_attempts = 2\n",
        ),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let phase = &v["phases"][0];
    assert_eq!(phase["status"], "failed");
    let reason = phase["reason"].as_str().unwrap();
    assert!(
        reason.contains("rejected the artifact in every one of 2 rounds"),
        "{reason}"
    );
    assert_eq!(phase["agents"][0]["attempts"], 2);
    assert!(!ws.path().join("prompt-3.txt").exists(), "no third round");
}

/// A judge is shown at most 30,000 characters of the artifact: a longer
/// one fails the phase, with the reason, and the judge is not run (its
/// approval would pass text it never saw, which later phases are given).
/// One of exactly 30,000 characters is judged, whole.
#[test]
fn an_artifact_longer_than_a_judge_is_shown_fails_without_judging() {
    // 19 characters around the filler: "# Plan\n\n## Steps\n\n" and "\n".
    let body = |chars: usize| format!("# Plan\\n\\n## Steps\\n\\n{}\\n", "x".repeat(chars - 19));
    let judge = "touch judged; cp \"$ORCH_PROMPT_FILE\" judge-prompt.txt";
    let ws = tempfile::tempdir().unwrap();
    let (out, v) = run(
        ws.path(),
        &pipeline(&body(30_001), judge, "judge = \"tests\"\n"),
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let phase = &v["phases"][0];
    assert_eq!(phase["status"], "failed");
    let reason = phase["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "is 30,001 characters, more than the 30,000 a judge is shown: it was not judged"
        ),
        "{reason}"
    );
    assert!(!ws.path().join("judged").exists(), "the judge ran");

    let ws = tempfile::tempdir().unwrap();
    let (out, v) = run(
        ws.path(),
        &pipeline(&body(30_000), judge, "judge = \"tests\"\n"),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(v["phases"][0]["status"], "succeeded");
    let prompt = std::fs::read_to_string(ws.path().join("judge-prompt.txt")).unwrap();
    assert!(!prompt.contains("(truncated)"), "{prompt}");
    assert!(prompt.contains(&format!("{}\n", "x".repeat(29_981))));
}

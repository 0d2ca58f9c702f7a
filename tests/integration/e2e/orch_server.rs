//! orch's own MCP server through each real CLI: the scripted model calls
//! `log_decision` in the CLI's spelling and the decision is in
//! `orch runs show --format json`; a call to a tool outside the phase's
//! scope (`start_task`) is refused and leaves no record; a completion claim
//! with a wrong hash is refused and fails the phase. And a real CLI as a
//! phase's judge, giving its verdict through the same server.

use std::process::Command;
use std::time::Duration;

use orch::agents::probe::run_bounded;
use orch::confine::Launch;
use orch::model::AgentKind;
use serde_json::{Value, json};

use super::{Level, ModelServer, changed, find_cli, orch_run, pipeline, scratch};
use crate::support::{Tool, require};

/// The name the model sees for orch's `tool`, in `kind`'s spelling.
fn spelled(kind: AgentKind, tool: &str) -> String {
    match kind {
        AgentKind::Claude => format!("mcp__orch__{tool}"),
        // Function `tool` in namespace `mcp__orch` (the endpoint's spelling).
        AgentKind::Codex => format!("mcp__orch.{tool}"),
        AgentKind::Gemini => format!("mcp_orch_{tool}"),
        AgentKind::Opencode => format!("orch_{tool}"),
        AgentKind::Copilot => format!("orch-{tool}"),
        AgentKind::Command => unreachable!("a command has no model"),
    }
}

/// The model calls orch's `tool` (Codex finds it with tool_search first,
/// as a real model would).
fn turns(kind: AgentKind, tool: &str, arguments: Value) -> Vec<Value> {
    let mut out = Vec::new();
    if kind == AgentKind::Codex {
        out.push(json!({"tool_search": {"query": tool}}));
    }
    out.push(json!({"tool_call": {"name": spelled(kind, tool), "arguments": arguments}}));
    out
}

/// The plan the model claims, in the workspace before the run (the phase
/// is read-only).
const PLAN: &str = "# Plan\n\nFirst read the code, then write the tests, then change the code \
                    until the tests pass, then ask for review.\n";

fn reports_through(kind: AgentKind) {
    let cli = find_cli(kind);
    let dir = scratch(&format!("orch-e2e-{kind}-orch-server-"));
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("plan.md"), PLAN).unwrap();

    let mut script = turns(
        kind,
        "log_decision",
        json!({"category": "library_choice", "question": "Which MCP SDK?",
               "options_considered": ["rmcp", "hand-written"], "chosen": "rmcp",
               "reasoning": "maintained, typed", "trade_offs": "one more dependency"}),
    );
    script.extend(turns(kind, "start_task", json!({"name": "n", "goal": "g"})));
    script.extend(turns(
        kind,
        "complete_phase",
        json!({"artifact_path": "plan.md", "artifact_hash": "0".repeat(64),
               "summary": "the plan", "confidence": "high"}),
    ));
    let server = ModelServer::start(dir.path(), &Value::Array(script));
    let text = changed(
        pipeline(&cli, Level::ReadOnly, &server, dir.path()),
        r#"mcp = ["mcp__fixture__echo"]"#,
        r#"mcp = ["mcp__orch__log_decision", "mcp__orch__complete_phase"]"#,
    );
    let text = changed(
        text,
        "prompt = \"Follow the scripted model.\"",
        "prompt = \"Follow the scripted model.\"\nartifacts = [\"plan.md\"]",
    );
    let run = orch_run(&cli, dir.path(), &server, &text);
    let ctx = run.context();

    // The wrong hash: refused by the server, and the phase fails on it.
    assert_eq!(run.code, Some(1), "{ctx}");
    let phase = &run.report["phases"][0];
    assert_eq!(phase["status"], "failed", "{ctx}");
    let reason = phase["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("refused the claim") && reason.contains("plan.md"),
        "{ctx}"
    );
    // The agent itself finished its session.
    assert_eq!(run.agent()["status"], "succeeded", "{ctx}");
    let results = run.tool_results();
    assert!(
        results.contains("its SHA-256 is"),
        "the model was told the real hash: {ctx}"
    );
    // Each CLI answers the call to a tool it was not given with an error
    // naming it ("No such tool available: mcp__orch__start_task", ...).
    assert!(
        results.contains("start_task"),
        "the call outside the scope came back refused: {ctx}"
    );

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orch"));
    cmd.args(["--state-dir", run.state_dir.to_str().unwrap()])
        .args(["runs", "show", "latest", "--format", "json"]);
    let out = run_bounded(
        Launch::from_command(&cmd, true),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let shown: Value = serde_json::from_str(&out.stdout).unwrap();
    let reports = shown["reports"].as_array().cloned().unwrap_or_default();
    let of = |k: &str| {
        reports
            .iter()
            .filter(|r| r["kind"] == k)
            .collect::<Vec<_>>()
    };
    let decisions = of("decision");
    assert_eq!(decisions.len(), 1, "{kind}: {reports:#?}\n{ctx}");
    let d = decisions[0];
    assert_eq!(d["data"]["chosen"], "rmcp");
    assert_eq!(
        (
            d["phase"].as_str(),
            d["agent"].as_str(),
            d["attempt"].as_u64()
        ),
        (Some("cell"), Some(kind.as_str()), Some(1))
    );
    // Outside the scope: not offered, and nothing recorded.
    assert!(of("task_started").is_empty(), "{reports:#?}");
    let claims = of("claim");
    assert_eq!(claims.len(), 1, "{reports:#?}");
    assert_eq!(claims[0]["data"]["accepted"], false);
    assert!(
        !run.answered_requests()
            .any(|r| offered(r).iter().any(|t| t.contains("start_task"))),
        "{kind} offered a tool outside the scope: {ctx}"
    );
}

/// The tool names a request offered the model.
fn offered(request: &Value) -> Vec<String> {
    ["tools", "found_tools"]
        .iter()
        .flat_map(|k| request[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t.as_str().map(str::to_string))
        .collect()
}

#[test]
fn claude_reports_through_orchs_server() {
    require!(Tool::AgentClis);
    reports_through(AgentKind::Claude);
}

#[test]
fn codex_reports_through_orchs_server() {
    require!(Tool::AgentClis);
    reports_through(AgentKind::Codex);
}

#[test]
fn gemini_reports_through_orchs_server() {
    require!(Tool::AgentClis);
    reports_through(AgentKind::Gemini);
}

#[test]
fn opencode_reports_through_orchs_server() {
    require!(Tool::AgentClis);
    reports_through(AgentKind::Opencode);
}

#[test]
fn copilot_reports_through_orchs_server() {
    require!(Tool::AgentClis);
    reports_through(AgentKind::Copilot);
}

/// The artifact the worker writes (so the test knows its hash).
const ARTIFACT: &str =
    "# Plan\n\n## Steps\n\n1. Read the code.\n2. Write the tests.\n\n## Risks\n\nNone known yet.\n";

/// A phase whose command worker writes [`ARTIFACT`] and whose judge is
/// the real Claude Code (read-only, confined, with orch's server),
/// answering from `script`: the run, read back.
fn judged_by_claude(script: Value, max_attempts: u32) -> (super::OrchRun, String) {
    judged_by_claude_with(script, max_attempts, ARTIFACT)
}

/// [`judged_by_claude`], the worker writing `second` from its second run on.
fn judged_by_claude_with(
    script: Value,
    max_attempts: u32,
    second: &str,
) -> (super::OrchRun, String) {
    let cli = find_cli(AgentKind::Claude);
    let dir = scratch("orch-e2e-claude-judge-");
    let server = ModelServer::start(dir.path(), &script);
    let base = pipeline(&cli, Level::ReadOnly, &server, dir.path());
    let head = &base[..base.find("[[phases]]").expect("a phase")];
    let worker = r#"run=$(head -n1 "$ORCH_PROMPT_FILE"); mkdir -p out; if [ -e out/wrote ]; then printf '%s' "$SECOND" > "out/plan-$run.md"; else printf '%s' "$BODY" > "out/plan-$run.md"; touch out/wrote; fi"#;
    let text = format!(
        "{head}[agents.worker]\nkind = \"command\"\ncommand = [\"sh\", \"-c\", {worker:?}]\nenv = {{ BODY = {ARTIFACT:?}, SECOND = {second:?} }}\n\n\
         [[phases]]\nname = \"plan\"\nagents = [\"worker\"]\nprompt = \"{{{{run_id}}}}\\nWrite the plan.\"\n\
         artifact = \"out/{{phase}}-{{run}}.md\"\nrequired_sections = [\"Steps\", \"Risks\"]\njudge = \"claude\"\nmax_attempts = {max_attempts}\n"
    );
    let run = orch_run(&cli, dir.path(), &server, &text);
    let ctx = run.context();
    (run, ctx)
}

#[test]
fn a_real_claude_judge_approves_through_orchs_server() {
    require!(Tool::AgentClis);
    let hash = orch::mcp::sha256_hex(ARTIFACT.as_bytes());
    let (run, ctx) = judged_by_claude(
        json!([{"tool_call": {
            "name": "mcp__orch__approve_phase",
            "arguments": {"phase": "plan", "artifact_hash": hash, "reason": "every step is testable"}
        }}]),
        1,
    );
    assert_eq!(run.code, Some(0), "{ctx}");
    let phase = &run.report["phases"][0];
    assert_eq!(phase["status"], "succeeded", "{ctx}");
    assert_eq!(phase["agents"][1]["agent"], "claude", "{ctx}");
    assert!(
        run.stderr.contains("judge claude approved round 1"),
        "{ctx}"
    );
    // The judge was shown the artifact.
    let asked = run
        .answered_requests()
        .next()
        .map(|r| r["body"].to_string())
        .unwrap_or_default();
    assert!(
        asked.contains("1. Read the code.") && asked.contains(&hash),
        "{ctx}"
    );
}

#[test]
fn a_real_claude_judge_that_gives_no_verdict_fails_the_gate() {
    require!(Tool::AgentClis);
    let (run, ctx) = judged_by_claude(json!([{"text": "Looks fine to me."}]), 1);
    assert_eq!(run.code, Some(1), "{ctx}");
    let phase = &run.report["phases"][0];
    assert_eq!(phase["status"], "failed", "{ctx}");
    assert!(
        phase["reason"]
            .as_str()
            .unwrap_or("")
            .contains("ended without approving or rejecting"),
        "{ctx}"
    );
}

#[test]
fn a_real_claude_judge_that_keeps_rejecting_sends_the_work_back_until_max_attempts() {
    require!(Tool::AgentClis);
    let hash = orch::mcp::sha256_hex(ARTIFACT.as_bytes());
    let (run, ctx) = judged_by_claude(
        json!([{"tool_call": {
            "name": "mcp__orch__reject_phase",
            "arguments": {"phase": "plan", "artifact_hash": hash, "reason": "no rollback step",
                          "fix_instructions": "Add a Rollback section."}
        }}]),
        2,
    );
    assert_eq!(run.code, Some(1), "{ctx}");
    let phase = &run.report["phases"][0];
    assert_eq!(phase["status"], "failed", "{ctx}");
    let reason = phase["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("rejected the artifact in every one of 2 rounds")
            && reason.contains("no rollback step"),
        "{ctx}"
    );
    let attempts: Vec<(&str, u64)> = phase["agents"]
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
    assert_eq!(attempts, [("worker", 2), ("claude", 2)], "{ctx}");
    assert!(
        run.stderr
            .contains("judge claude rejected round 1: no rollback step"),
        "{ctx}"
    );
}

#[test]
fn a_real_claude_judge_rejects_then_approves_the_reworked_artifact() {
    require!(Tool::AgentClis);
    // Each round the judge starts a new session, so the script is the
    // same: reject the first artifact, approve the second. In round 1 the
    // approval names a hash orch has no claim for (refused); in round 2 the
    // rejection names the old hash, which is not this round's artifact.
    let second = format!("{ARTIFACT}\n## Rollback\n\nRevert the commit.\n");
    let first_hash = orch::mcp::sha256_hex(ARTIFACT.as_bytes());
    let second_hash = orch::mcp::sha256_hex(second.as_bytes());
    let (run, ctx) = judged_by_claude_with(
        json!([
            {"tool_call": {"name": "mcp__orch__reject_phase", "arguments": {
                "phase": "plan", "artifact_hash": first_hash, "reason": "no rollback step",
                "fix_instructions": "Add a Rollback section."}}},
            {"tool_call": {"name": "mcp__orch__approve_phase", "arguments": {
                "phase": "plan", "artifact_hash": second_hash, "reason": "it has a rollback now"}}}
        ]),
        3,
        &second,
    );
    assert_eq!(run.code, Some(0), "{ctx}");
    let phase = &run.report["phases"][0];
    assert_eq!(phase["status"], "succeeded", "{ctx}");
    let attempts: Vec<(&str, u64)> = phase["agents"]
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
    assert_eq!(attempts, [("worker", 2), ("claude", 2)], "{ctx}");
    assert!(
        run.stderr
            .contains("judge claude rejected round 1: no rollback step")
            && run.stderr.contains("judge claude approved round 2"),
        "{ctx}"
    );
}

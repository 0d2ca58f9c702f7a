//! The adapters against the real agent CLIs, installed at the pinned
//! versions by `scripts/install-agent-clis.sh` (which `scripts/test` runs):
//! `orch doctor` finds and verifies them, and every example's command lines
//! are accepted by the real CLIs while a bad one is rejected with the CLI's
//! own message. Without the CLIs, plain `cargo test` skips these tests
//! (saying so on stderr) and `scripts/test` fails them.

use std::process::Output;

use serde_json::Value;

use crate::support::{
    Tool, clis_dir, doctor_elsewhere, example_pipelines, json_of, orch, path_with_clis, require,
    stderr, write,
};

#[test]
fn doctor_finds_every_pinned_cli() {
    require!(Tool::AgentClis);
    let out = doctor_elsewhere(&["--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    // This machine confines (the suite needs Landlock), and says its ABI.
    assert_eq!(report["confinement"]["state"], "available", "{report}");
    assert!(
        report["confinement"]["abi"].as_u64().unwrap() >= 3,
        "{report}"
    );
    let rows = report["clis"].as_array().unwrap().clone();
    let kinds: Vec<&str> = rows.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["claude", "codex", "gemini", "opencode", "copilot"]);
    for r in &rows {
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["version"], r["verified_version"], "{r}");
    }
}

/// `orch doctor` runs each CLI (`--version`) itself, unconfined: never
/// one found in a folder of the workspace on `PATH` (an activated
/// `.venv/bin`, where an agent could have put a `claude` or the `node` a
/// CLI's `#!/usr/bin/env node` line starts), nor a `node` from there. The
/// control: every pinned CLI is still found and verified.
#[test]
fn doctor_runs_nothing_from_the_workspace() {
    require!(Tool::AgentClis);
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let bin = ws.path().join(".venv/bin");
    let marker = ws.path().join("planted-ran");
    for name in ["node", "claude", "gemini", "codex"] {
        write(
            ws.path(),
            &format!(".venv/bin/{name}"),
            &format!("#!/bin/sh\necho {name} >> '{}'\n", marker.display()),
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // `orch doctor` in the workspace with `PATH` and `args`: it runs
    // nothing planted.
    let doctor = |path: String, args: &[&str]| {
        let out = orch()
            .current_dir(ws.path())
            .env("PATH", path)
            .env("COPILOT_CACHE_HOME", clis_dir().join("copilot-cache"))
            .env("ORCH_STATE_DIR", state.path())
            .args(args)
            .args(["doctor", "--format", "json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let ran = std::fs::read_to_string(&marker).unwrap_or_default();
        assert!(ran.is_empty(), "orch ran planted programs: {ran}");
        json_of(&out)
    };
    let report = doctor(format!("{}:{}", bin.display(), path_with_clis()), &[]);
    for r in report["clis"].as_array().unwrap() {
        assert_eq!(r["verified"], true, "{r}");
    }
    // A CLI given by its path in the folder doctor runs in is named, not
    // run.
    let given = format!("claude={}", bin.join("claude").display());
    let report = doctor(path_with_clis(), &["--agent-binary", &given]);
    let claude = &report["clis"][0];
    assert!(
        claude["problem"]
            .as_str()
            .is_some_and(|p| p.contains("doctor does not run it")),
        "{claude}"
    );
}

#[test]
fn doctor_reports_a_missing_cli() {
    let out = orch()
        .env("PATH", "/nonexistent")
        .args(["doctor", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let rows = json_of(&out)["clis"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 5, "every kind is reported");
    for r in &rows {
        assert_eq!(r["verified"], false);
        assert!(
            r["problem"].as_str().unwrap().contains("is not on PATH"),
            "{r}"
        );
    }
}

/// The rows of `orch doctor --format json`.
fn rows_of(out: &Output) -> Vec<Value> {
    match json_of(out) {
        Value::Array(rows) => rows,
        other => panic!("not an array of rows: {other}"),
    }
}

#[test]
fn doctor_says_whether_it_can_confine() {
    let out = orch().args(["doctor"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("confinement  Landlock ABI ")
            && text.contains("every agent's permission is held by the OS"),
        "{text}"
    );
    let out = orch()
        .env("ORCH_CONFINEMENT", "off")
        .args(["doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("confinement  off (`confinement = \"off\"` in the settings)")
            && text.contains("refused under strict enforcement"),
        "{text}"
    );
}

fn probe(file: &str) -> (Output, Vec<Value>) {
    let file = crate::support::root().join(file);
    let out = doctor_elsewhere(&["--probe", file.to_str().unwrap(), "--format", "json"]);
    let rows = rows_of(&out);
    (out, rows)
}

#[test]
fn every_example_is_accepted_by_the_real_clis() {
    require!(Tool::AgentClis);
    let mut kinds_seen = std::collections::BTreeSet::new();
    for file in example_pipelines() {
        let (out, rows) = probe(&file);
        for r in &rows {
            assert_eq!(r["accepted"], true, "{file}: {r}");
            kinds_seen.insert(r["kind"].as_str().unwrap().to_string());
        }
        assert_eq!(out.status.code(), Some(0), "{file}");
    }
    assert_eq!(
        kinds_seen.into_iter().collect::<Vec<_>>(),
        ["claude", "codex", "copilot", "gemini", "opencode"],
        "the examples exercise every CLI"
    );
}

#[test]
fn a_bad_argv_is_rejected_with_the_clis_own_message() {
    require!(Tool::AgentClis);
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "bad.toml",
        r#"version = 1
name = "rejected"

[agents.claude.modes.audit]
flags = ["--no-such-flag"]

[agents.codex.modes.audit]
flags = ["--color", "purple"]

[agents.gemini.modes.audit]
flags = ["--no-such-flag"]

[agents.copilot.modes.audit]
flags = ["--reasoning-effort", "sideways"]

[[phases]]
name = "audit"
agents = ["claude", "codex", "gemini", "copilot"]
mode = "audit"
prompt = "Audit."
"#,
    );
    let (out, rows) = probe(file.to_str().unwrap());
    assert_eq!(out.status.code(), Some(1));
    let message = |kind: &str| -> String {
        let r = rows.iter().find(|r| r["kind"] == kind).unwrap();
        assert_eq!(r["accepted"], false, "{r}");
        r["message"].as_str().unwrap().to_string()
    };
    assert!(message("claude").contains("unknown option '--no-such-flag'"));
    assert!(message("codex").contains("invalid value 'purple'"));
    assert!(message("gemini").contains("Unknown argument"));
    assert!(message("copilot").contains("invalid value 'sideways'"));
}

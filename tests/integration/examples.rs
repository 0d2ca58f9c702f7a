//! The example pipelines: each validates, and the documented resolution
//! example resolves exactly as docs/pipeline.md ("Worked example") says.

use serde_json::{Value, json};

use crate::support::{example_pipelines, json_of, root, run, stderr, stdout, write};

#[test]
fn the_three_examples_exist() {
    let e = example_pipelines();
    for name in [
        "pipelines/demo.toml",
        "pipelines/research-audit.toml",
        "pipelines/audit-then-fix.toml",
    ] {
        assert!(e.contains(&name.to_string()), "{name} is missing");
    }
}

#[test]
fn every_example_validates() {
    for file in example_pipelines() {
        let out = run(&["validate", &file]);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", stderr(&out));
        assert!(stdout(&out).starts_with(&format!("ok: `{file}`")));
        for cmd in ["plan", "explain"] {
            let out = run(&[cmd, &file, "--format", "json"]);
            assert_eq!(out.status.code(), Some(0), "{cmd} {file}: {}", stderr(&out));
            json_of(&out);
        }
    }
}

fn explain(file: &str, extra: &[&str]) -> Value {
    let mut args = vec!["explain", file, "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    json_of(&out)
}

/// The worked example of docs/pipeline.md, field by field.
#[test]
fn research_audit_codex_resolves_per_field() {
    let v = explain(
        "pipelines/research-audit.toml",
        &["--phase", "audit", "--agent", "codex"],
    );
    assert_eq!(v["pipeline"], "audit-and-fix");
    let inv = &v["invocations"];
    assert_eq!(inv.as_array().unwrap().len(), 1);
    let inv = &inv[0];
    assert_eq!(
        (&inv["phase"], &inv["agent"], &inv["kind"], &inv["mode"]),
        (
            &json!("audit"),
            &json!("codex"),
            &json!("codex"),
            &json!("audit")
        )
    );
    assert_eq!(
        inv["toolset"],
        json!({
            "internal": ["Read", "Glob", "Grep", "Agent"],
            "mcp": ["mcp__orch__*"],
            "permission": "workspace-write",
            "max_turns": 30
        })
    );
    assert_eq!(
        inv["provenance"],
        json!({
            "internal": {"layer": "tools", "at": "pipelines/research-audit.toml:55:12"},
            "mcp": {"layer": "default", "at": null},
            "permission": {"layer": "agent_tools", "at": "pipelines/research-audit.toml:59:14"},
            "max_turns": {"layer": "agent_tools", "at": "pipelines/research-audit.toml:60:13"}
        })
    );
    // The positions really are where those values are written.
    let text = std::fs::read_to_string(root().join("pipelines/research-audit.toml")).unwrap();
    let at = |line: usize, col: usize| &text.lines().nth(line - 1).unwrap()[col - 1..];
    assert!(at(55, 12).starts_with("[\"Read\", \"Glob\", \"Grep\", \"Agent\"]"));
    assert!(at(59, 14).starts_with("\"workspace-write\""));
    assert!(at(60, 13).starts_with("30"));
}

#[test]
fn gemini_in_the_same_phase_keeps_the_phase_tools() {
    let v = explain(
        "pipelines/research-audit.toml",
        &["--phase", "audit", "--agent", "gemini"],
    );
    let inv = &v["invocations"][0];
    assert_eq!(inv["toolset"]["permission"], "read-only");
    assert_eq!(inv["toolset"]["max_turns"], 50);
    assert_eq!(inv["provenance"]["permission"]["layer"], "tools");
}

#[test]
fn every_layer_shows_up_in_the_examples() {
    // research: tools; claude in audit-then-fix audit-security: profile;
    // defaults elsewhere; the mode layer in research-audit's claude table is
    // shadowed there, so check it with a phase that has no tools.
    let v = explain(
        "pipelines/audit-then-fix.toml",
        &["--phase", "audit-security"],
    );
    let inv = &v["invocations"][0];
    assert_eq!(inv["provenance"]["internal"]["layer"], "profile");
    assert!(
        inv["provenance"]["internal"]["at"]
            .as_str()
            .unwrap()
            .ends_with("profiles/auditor.md:5:12"),
        "{}",
        inv["provenance"]["internal"]
    );
    assert_eq!(inv["provenance"]["mcp"]["layer"], "tools");
    assert_eq!(inv["provenance"]["max_turns"]["layer"], "tools");
    assert_eq!(inv["toolset"]["permission"], "read-only");
}

#[test]
fn explain_text_shows_fields_and_positions() {
    let out = run(&[
        "explain",
        "pipelines/research-audit.toml",
        "--phase",
        "audit",
        "--agent",
        "codex",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.starts_with("audit / codex  (kind codex, mode audit)\n"),
        "{text}"
    );
    assert!(text.contains("permission  workspace-write"), "{text}");
    assert!(
        text.contains("agent_tools pipelines/research-audit.toml:59:14"),
        "{text}"
    );
    assert!(text.contains("mcp__orch__*"), "{text}");
}

/// `explain` prints the command line, environment and files each invocation
/// gets, with secrets redacted and credentials passed by reference.
#[test]
fn explain_shows_invocations_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "p.toml",
        r#"version = 1
name = "secrets"

[agents.claude]
env = { API_TOKEN = "sk-live-123456", MAX_OUTPUT_TOKENS = "64000", DEPLOY_KEY = "${DEPLOY_KEY}" }

[mcp_servers.search]
command = ["search-mcp"]
env = { SEARCH_API_KEY = "literal-secret-789" }

[[phases]]
name = "look"
agents = ["claude"]
mode = "audit"
prompt = "Look."
[phases.tools]
mcp = ["mcp__search__*"]
"#,
    );
    let f = file.to_str().unwrap();
    for format in ["text", "json"] {
        let out = run(&["explain", f, "--format", format]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let all = stdout(&out);
        assert!(
            all.contains("API_TOKEN") && all.contains("SEARCH_API_KEY"),
            "{format}: the environment is shown: {all}"
        );
        assert!(!all.contains("sk-live-123456"), "{format}: {all}");
        assert!(!all.contains("literal-secret-789"), "{format}: {all}");
    }
    let v = explain(f, &[]);
    let inv = &v["invocations"][0];
    let env = &inv["env"];
    assert_eq!(env["API_TOKEN"], "<redacted>");
    assert_eq!(env["MAX_OUTPUT_TOKENS"], "64000");
    assert_eq!(env["DEPLOY_KEY"], "${DEPLOY_KEY}");
    assert_eq!(env["ANTHROPIC_API_KEY"], "${ANTHROPIC_API_KEY}");
    // The server's credential stays with the server, which orch starts.
    assert_eq!(env["SEARCH_API_KEY"], Value::Null);
    let server = v["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "search")
        .cloned()
        .unwrap();
    assert_eq!(server["env"]["SEARCH_API_KEY"], "<redacted>", "{server}");
    // Each attempt gets a fresh directory of its own outside the workspace;
    // a preview shows where, with the random part as XXXXXX.
    assert!(
        env["HOME"]
            .as_str()
            .unwrap()
            .ends_with("orch/attempts/look-claude-XXXXXXXXXXXXXXXX/home"),
        "{env}"
    );
    assert!(
        env.get("USER").is_none(),
        "nothing else is inherited: {env}"
    );
    let argv: Vec<&str> = inv["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "claude");
    let at = |flag: &str| argv[argv.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(at("--tools"), "Read,Glob,Grep");
    assert_eq!(at("--permission-mode"), "dontAsk");
    assert_eq!(at("--allowedTools"), "Read,Glob,Grep,mcp__search__*");
    // The MCP config names a relay to orch's endpoint for the server, and
    // nothing of the server's environment.
    let files = inv["files"].as_array().unwrap();
    let mcp = files
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("mcp.json"))
        .unwrap();
    let config = mcp["content"].as_str().unwrap();
    assert!(config.contains("mcp-search.sock"), "{config}");
    assert!(!config.contains("SEARCH_API_KEY"), "{config}");
    // The OS holds the permission (this machine confines), and explain
    // says how: what the process tree may write and may not read.
    assert_eq!(inv["enforcement"]["permission"]["by"], "os");
    assert_eq!(inv["enforcement"]["max_turns"]["by"], "cli");
    let confinement = &inv["confinement"];
    assert!(confinement["abi"].as_u64().unwrap() >= 3, "{confinement}");
    assert_eq!(confinement["policy"]["permission"], "read-only");
    let writable: Vec<&str> = confinement["policy"]["writable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    // The CLI's own folders in its directory are writable; the files orch
    // writes for it (its MCP configuration among them) are not.
    let own = "look-claude-XXXXXXXXXXXXXXXX";
    assert!(
        writable.iter().any(|w| w.ends_with(&format!("{own}/home")))
            && writable
                .iter()
                .any(|w| w.ends_with(&format!("{own}/claude"))),
        "{confinement}"
    );
    let mcp_path = mcp["path"].as_str().unwrap();
    assert!(mcp_path.contains(&format!("{own}/orch/")), "{mcp}");
    assert!(
        !writable.iter().any(|w| mcp_path.starts_with(w)),
        "orch's files are not writable: {confinement}"
    );
    assert!(
        !writable
            .iter()
            .any(|w| Some(*w) == crate::support::root().to_str()),
        "read-only may not write the workspace: {confinement}"
    );
    assert_eq!(v["confinement"]["state"], "available", "{v}");
}

/// A secret written in an argv (a plain command's `command`, an MCP
/// server's `command`) is redacted wherever the argv is shown or stored,
/// by the rules the environment's values follow: a credential-looking
/// value, a value after a secret-looking flag or name. The process still
/// gets every value as written.
#[test]
fn secrets_in_argv_are_redacted_wherever_shown_or_stored() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = write(
        d,
        "p.toml",
        r#"version = 1
name = "argv-secrets"

[agents.deploy]
kind = "command"
command = ["sh", "-c", "printf '%s\n' \"$@\" > got.txt", "deploy",
    "sk-proj-abcdefghijklmnop0123", "--password", "hunter2-plain",
    "--db=postgres://u:pw-in-url@db/app", "API_TOKEN=tok-literal-42",
    "${ARGV_SECRET_VAR}", "--verbose", "plain-arg"]

[mcp_servers.search]
command = ["search-mcp", "--api-key", "mcp-literal-key-77",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345", "--region", "eu"]

[[phases]]
name = "ship"
agents = ["deploy"]

[[phases]]
name = "look"
agents = ["claude", "codex", "gemini", "opencode", "copilot"]
mode = "audit"
prompt = "Look."
[phases.tools]
mcp = ["mcp__search__*"]
"#,
    );
    let f = file.to_str().unwrap();
    let secrets = [
        "sk-proj-abcdefghijklmnop0123",
        "hunter2-plain",
        "pw-in-url",
        "tok-literal-42",
        "mcp-literal-key-77",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "env-secret-value-99",
    ];
    let clean = |what: &str, text: &str| {
        for s in secrets {
            assert!(!text.contains(s), "{what} shows `{s}`: {text}");
        }
    };
    let orch_in = |args: &[&str]| {
        crate::support::orch()
            .current_dir(d)
            .env("ARGV_SECRET_VAR", "env-secret-value-99")
            .args(args)
            .output()
            .unwrap()
    };
    // explain (both formats, every CLI's argv and files), and the dry run.
    for args in [
        &["explain", f][..],
        &["explain", f, "--format", "json"],
        &["run", f, "--dry-run"],
    ] {
        let out = orch_in(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        clean(&format!("{args:?}"), &stdout(&out));
    }
    let v = explain(f, &["--phase", "ship"]);
    let shown = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    let expected = [
        "sh",
        "-c",
        "printf '%s\n' \"$@\" > got.txt",
        "deploy",
        "<redacted>",
        "--password",
        "<redacted>",
        "--db=<redacted>",
        "API_TOKEN=<redacted>",
        "${ARGV_SECRET_VAR}",
        "--verbose",
        "plain-arg",
    ];
    assert_eq!(shown(&v["invocations"][0]["argv"]), expected);
    let v = explain(f, &["--phase", "look"]);
    assert_eq!(
        shown(&v["mcp_servers"][0]["command"]),
        [
            "search-mcp",
            "--api-key",
            "<redacted>",
            "<redacted>",
            "--region",
            "eu"
        ]
    );

    // The run: the process gets the values as written; the run's records
    // (runs show, the database, an export) hold them redacted.
    let out = orch_in(&["--state-dir", "st", "run", f, "--phase", "ship"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got = std::fs::read_to_string(d.join("got.txt")).unwrap();
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        [
            "sk-proj-abcdefghijklmnop0123",
            "--password",
            "hunter2-plain",
            "--db=postgres://u:pw-in-url@db/app",
            "API_TOKEN=tok-literal-42",
            "${ARGV_SECRET_VAR}",
            "--verbose",
            "plain-arg"
        ]
    );
    let out = orch_in(&[
        "--state-dir",
        "st",
        "runs",
        "show",
        "latest",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    clean("runs show", &stdout(&out));
    let v = json_of(&out);
    assert_eq!(shown(&v["phases"][0]["agents"][0]["argv"]), expected);
    let out = orch_in(&["--state-dir", "st", "state", "export", "-o", "run.db"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    for db in ["run.db", "st/state.db", "st/state.db-wal"] {
        if let Ok(bytes) = std::fs::read(d.join(db)) {
            clean(db, &String::from_utf8_lossy(&bytes));
        }
    }
}

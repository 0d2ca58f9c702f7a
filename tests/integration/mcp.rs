//! orch's MCP server over stdio, driven by clients orch did not write:
//! the official Python SDK and the MCP Inspector CLI (both installed by
//! `scripts/install-mcp-clients.sh`, which the test command runs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::support::*;

/// Where the pinned clients are (`ORCH_MCP_CLIENTS_DIR`, else the cache).
fn clients() -> PathBuf {
    let dir = std::env::var_os("ORCH_MCP_CLIENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/mcp-clients"));
    assert!(
        dir.join("venv/bin/python").exists()
            && dir.join("node_modules/.bin/mcp-inspector").exists(),
        "the MCP clients are not installed in {}: run scripts/install-mcp-clients.sh (scripts/test does)",
        dir.display()
    );
    dir
}

/// A state directory holding one finished run; its id.
fn state_with_a_run(dir: &Path) -> (PathBuf, String) {
    let state = dir.join("state");
    let p = dir.join("p.toml");
    std::fs::write(
        &p,
        "version = 1\nname = \"t\"\n[agents.sh]\nkind = \"command\"\ncommand = [\"true\"]\n[[phases]]\nname = \"plan\"\nagents = [\"sh\"]\n",
    )
    .unwrap();
    let out = orch()
        .args([
            "--state-dir",
            state.to_str().unwrap(),
            "run",
            p.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let list = orch()
        .args([
            "--state-dir",
            state.to_str().unwrap(),
            "runs",
            "list",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let run = json_of(&list)[0]["run_id"].as_str().unwrap().to_string();
    (state, run)
}

fn serve_argv(state: &Path, run: &str, ws: &Path, tools: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = [
        env!("CARGO_BIN_EXE_orch"),
        "mcp",
        "serve",
        "--run",
        run,
        "--phase",
        "plan",
        "--agent",
        "claude",
        "--state-dir",
        state.to_str().unwrap(),
        "--workspace",
        ws.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(t) = tools {
        a.extend(["--tools".to_string(), t.to_string()]);
    }
    a
}

#[test]
fn the_python_sdk_lists_calls_and_is_refused_outside_the_scope() {
    let py = clients().join("venv/bin/python");
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let (state, run) = state_with_a_run(dir.path());
    let calls = json!([
        ["log_decision", {"category": "library_choice", "question": "which MCP SDK", "options_considered": ["rmcp", "hand-written"], "chosen": "rmcp", "reasoning": "maintained"}],
        ["start_task", {"name": "n", "goal": "g"}],
        ["log_decision", {"category": "vibes"}],
        ["complete_phase", {"artifact_path": "../x.md", "artifact_hash": "0", "summary": "s", "confidence": "low"}],
        ["add_learning", {"pattern": "Run the MCP conformance checks before touching any tool schema in this repo", "learning_type": "convention", "applies_to": "src/mcp"}]
    ]);
    let out = Command::new(py)
        .arg(root().join("tests/mcp/python_client.py"))
        .arg(calls.to_string())
        .arg("--")
        .args(serve_argv(
            &state,
            &run,
            &ws,
            Some("log_decision,complete_phase,add_learning"),
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["server"], "orch");
    let names: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add_learning", "complete_phase", "log_decision"]);
    let r = got["results"].as_array().unwrap();
    assert_eq!(r[0]["is_error"], false, "{}", r[0]);
    assert!(
        r[1]["is_error"].as_bool().unwrap()
            && r[1]["text"].as_str().unwrap().contains("not granted"),
        "{}",
        r[1]
    );
    assert!(
        r[2]["is_error"].as_bool().unwrap() && r[2]["text"].as_str().unwrap().contains("vibes"),
        "{}",
        r[2]
    );
    assert!(r[3]["is_error"].as_bool().unwrap(), "{}", r[3]);
    // The decision is in the run's record, stamped with the attempt.
    let conn = rusqlite::Connection::open(state.join("state.db")).unwrap();
    let (k, who, data): (String, String, String) = conn
        .query_row("SELECT kind, run_id || '/' || phase || '/' || agent || '/' || attempt, data_json FROM reports", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    assert_eq!(k, "decision");
    assert_eq!(who, format!("{run}/plan/claude/1"));
    assert!(data.contains("which MCP SDK"));
    assert_eq!(r[4]["is_error"], false, "{}", r[4]);

    // A person sees it too: `orch runs show` and `orch learnings search`.
    let orch_in_state = |args: &[&str]| {
        let out = orch()
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let shown = orch_in_state(&["runs", "show", &run]);
    assert!(
        shown.contains(
            "decisions\n  plan/claude#1  [library_choice] which MCP SDK -> rmcp: maintained"
        ),
        "{shown}"
    );
    assert!(shown.contains("learnings\n"), "{shown}");
    let json: Value =
        serde_json::from_str(&orch_in_state(&["runs", "show", &run, "--format", "json"])).unwrap();
    assert_eq!(json["reports"][0]["kind"], "decision");
    assert_eq!(json["reports"][0]["data"]["chosen"], "rmcp");
    assert_eq!(json["learnings"][0]["learning_type"], "convention");
    let found = orch_in_state(&["learnings", "search", "conformance schema"]);
    assert!(
        found.contains("[convention] (quality 50) Run the MCP conformance checks"),
        "{found}"
    );
    let none = orch()
        .arg("--state-dir")
        .arg(&state)
        .args(["learnings", "search", "kubernetes"])
        .output()
        .unwrap();
    assert!(none.status.success() && stdout(&none).is_empty());
    assert!(
        stderr(&none).contains("no learning matches"),
        "{}",
        stderr(&none)
    );
}

#[test]
fn the_inspector_finds_every_tool_schema_portable() {
    let inspector = clients().join("node_modules/.bin/mcp-inspector");
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let (state, run) = state_with_a_run(dir.path());
    let out = Command::new(inspector)
        .arg("--cli")
        .args(serve_argv(&state, &run, &ws, None))
        .args(["--method", "tools/list", "--strict", "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools = got["result"]["tools"].as_array().unwrap();
    assert!(tools.len() >= 19, "{}", tools.len());
    assert_eq!(got.get("schemaFindings"), None, "{}", got["schemaFindings"]);
}

/// `orch mcp serve` for `run` driven over raw JSON-RPC lines: `n`
/// `add_comment` calls sent at once, each answered; the texts it wrote.
fn comment_through_a_server(state: &Path, ws: &Path, run: &str, agent: &str, n: usize) {
    use std::io::{BufRead, BufReader, Write};
    let mut argv = serve_argv(state, run, ws, None);
    let at = argv.iter().position(|a| a == "--agent").unwrap();
    argv[at + 1] = agent.to_string();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut lines = vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        lines.extend((1..=n).map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "add_comment", "arguments": {"text": format!("comment {i}")}}})
        }));
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
        stdin
    });
    let mut answered = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["id"].as_u64().is_some_and(|id| id > 0) {
            assert_eq!(v["result"]["isError"], false, "{agent}: {v}");
            answered += 1;
            if answered == n {
                break;
            }
        }
    }
    assert_eq!(answered, n, "{agent}: every call answered");
    drop(writer.join().unwrap());
    child.wait().unwrap();
}

#[test]
fn eight_servers_and_the_engine_write_at_once_and_nothing_is_lost_or_doubled() {
    // The engine records a command agent's lines (one event each) until the
    // servers are done; meanwhile 8 `orch mcp serve` processes append 500
    // comments each to the same run.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let state = dir.path().join("state");
    let p = dir.path().join("p.toml");
    // Bounded: at most 60 s or 400,000 lines, whichever comes first.
    std::fs::write(
        &p,
        r#"version = 1
name = "load"
[agents.talker]
kind = "command"
command = ["python3", "-c", "import os, sys, time\nend = time.time() + 60\nn = 0\nwhile not os.path.exists('stop') and time.time() < end and n < 400000:\n    print(f'line {n}')\n    n += 1\n    if n % 100 == 0:\n        sys.stdout.flush()\n        time.sleep(0.005)\nsys.stdout.flush()\nopen('count', 'w').write(str(n))\n"]
[[phases]]
name = "plan"
agents = ["talker"]
"#,
    )
    .unwrap();
    let engine = orch()
        .current_dir(&ws)
        .args(["--state-dir", state.to_str().unwrap(), "run"])
        .arg(&p)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let run = loop {
        assert!(started.elapsed().as_secs() < 30, "the run never started");
        let list = orch()
            .args(["--state-dir", state.to_str().unwrap()])
            .args(["runs", "list", "--format", "json"])
            .output()
            .unwrap();
        if let Some(id) = serde_json::from_slice::<Value>(&list.stdout)
            .ok()
            .and_then(|v| v[0]["run_id"].as_str().map(str::to_string))
            && !ws.join("count").exists()
        {
            break id;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let servers: Vec<_> = (0..8)
        .map(|k| {
            let (state, ws, run) = (state.clone(), ws.clone(), run.clone());
            std::thread::spawn(move || {
                comment_through_a_server(&state, &ws, &run, &format!("agent{k}"), 500)
            })
        })
        .collect();
    for s in servers {
        s.join().unwrap();
    }
    std::fs::write(ws.join("stop"), "").unwrap();
    let out = finish_within(engine, std::time::Duration::from_secs(90), "orch run");
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: u64 = std::fs::read_to_string(ws.join("count"))
        .unwrap()
        .parse()
        .unwrap();

    let conn = rusqlite::Connection::open(state.join("state.db")).unwrap();
    let (total, distinct): (u64, u64) = conn
        .query_row(
            "SELECT count(*), count(DISTINCT agent || data_json) FROM reports
             WHERE kind = 'comment' AND run_id = ?1",
            [&run],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((total, distinct), (4000, 4000));
    let per_agent: Vec<(String, u64)> = conn
        .prepare("SELECT agent, count(*) FROM reports GROUP BY agent ORDER BY agent")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(per_agent.iter().all(|(_, n)| *n == 500), "{per_agent:?}");
    let events: u64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE run_id = ?1 AND kind = 'raw'",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, printed, "every line the agent printed is an event");
    // It stopped on `stop`, so it was talking all the while the servers wrote.
    assert!(printed > 0 && printed < 400_000, "{printed}");
    eprintln!("engine events while the servers wrote: {printed}");
}

/// The research phase of the ToolSet decision record's own example
/// (`orchcore-adr-009-toolsets.md`): two MCP servers the team configured
/// for Claude Code in the project's `.mcp.json`, none in the pipeline.
const ADR_RESEARCH: &str = r#"version = 1
name = "adr-009"

[[phases]]
name = "research"
agents = ["claude"]
prompt = "Research it."
[phases.tools]
internal = ["Read", "Glob", "Grep"]
mcp = ["mcp__tavily__tavily_research", "mcp__exa__web_search_exa"]
permission = "read-only"
max_turns = 40
"#;

/// Its audit phase, as the record writes it.
const ADR_AUDIT: &str = r#"
[[phases]]
name = "audit"
agents = ["gemini", "codex"]
parallel = true
prompt = "Audit it."
[phases.tools]
internal = ["Read", "Glob", "Grep", "Agent"]
permission = "read-only"
max_turns = 50
[phases.agent_tools.codex]
permission = "workspace-write"
max_turns = 30
"#;

const MCP_JSON: &str = r#"{
  "mcpServers": {
    "tavily": {"command": "npx", "args": ["-y", "tavily-mcp@0.2.4"], "env": {"TAVILY_API_KEY": "${TAVILY_API_KEY}"}},
    "exa": {"command": "npx", "args": ["-y", "exa-mcp-server@2.0.0"], "env": {"EXA_API_KEY": "${EXA_API_KEY}"}},
    "docs": {"type": "http", "url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
  }
}"#;

#[test]
fn the_decision_records_example_finds_its_servers_in_the_projects_mcp_json() {
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), "p.toml", ADR_RESEARCH);
    // Without the file: refused, saying where orch looked.
    let out = run_in(ws.path(), &["validate", "p.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = flat_stderr(&out);
    assert!(
        err.contains("server `tavily`, which is not declared")
            && err.contains("`./.mcp.json` (there is none)")
            && err.contains("`[mcp_servers.tavily]`"),
        "{err}"
    );

    write(ws.path(), ".mcp.json", MCP_JSON);
    let out = run_in(ws.path(), &["validate", "p.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let explain: Value = serde_json::from_slice(
        &run_in(ws.path(), &["explain", "p.toml", "--format", "json"]).stdout,
    )
    .unwrap();
    let servers = explain["mcp_servers"].as_array().unwrap();
    let names: Vec<(&str, &str)> = servers
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["source"].as_str().unwrap()))
        .collect();
    assert_eq!(names, [("exa", "./.mcp.json"), ("tavily", "./.mcp.json")]);
    // The CLI gets them (Claude Code's own config, written by orch).
    let files = explain["invocations"][0]["files"].to_string();
    assert!(
        files.contains("tavily-mcp@0.2.4") && files.contains("exa-mcp-server@2.0.0"),
        "{files}"
    );

    // The pipeline wins on a clash.
    let mut own = ADR_RESEARCH.to_string();
    own.push_str("\n[mcp_servers.tavily]\ncommand = [\"tavily-local\"]\n");
    write(ws.path(), "p.toml", &own);
    let explain: Value = serde_json::from_slice(
        &run_in(ws.path(), &["explain", "p.toml", "--format", "json"]).stdout,
    )
    .unwrap();
    let tavily = explain["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tavily")
        .cloned()
        .unwrap();
    assert_eq!(tavily["command"], json!(["tavily-local"]));
    assert!(
        tavily["source"].as_str().unwrap().starts_with("p.toml:"),
        "{tavily}"
    );

    // The whole example: its MCP servers are found; what is left is the
    // audit phase's codex, which cannot drop apply_patch (orch says so).
    write(ws.path(), "p.toml", &format!("{ADR_RESEARCH}{ADR_AUDIT}"));
    let out = run_in(ws.path(), &["validate", "--format", "json", "p.toml"]);
    let report = json_of(&out);
    let codes: Vec<String> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| format!("{} {}", d["code"], d["message"]))
        .collect();
    assert_eq!(codes.len(), 1, "{codes:?}");
    assert!(
        codes[0].contains("unenforceable") && codes[0].contains("codex"),
        "{codes:?}"
    );
}

#[test]
fn a_remote_server_in_a_read_only_phase_needs_the_pipelines_word() {
    let ws = tempfile::tempdir().unwrap();
    write(ws.path(), ".mcp.json", MCP_JSON);
    let phase = "version = 1\nname = \"r\"\n[[phases]]\nname = \"research\"\nagents = [\"claude\"]\nprompt = \"x\"\n[phases.tools]\ninternal = [\"Read\"]\nmcp = [\"mcp__docs__search\"]\npermission = \"read-only\"\n";
    write(ws.path(), "p.toml", phase);
    let out = run_in(ws.path(), &["validate", "p.toml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = flat_stderr(&out);
    assert!(
        err.contains("`docs` is remote") && err.contains("read_only = true"),
        "{err}"
    );

    // Declared in the pipeline with its word: it validates, and the header
    // travels by a variable, never in the config file.
    write(
        ws.path(),
        "p.toml",
        &format!(
            "{phase}[mcp_servers.docs]\nurl = \"https://docs.example.com/mcp\"\nheaders = {{ Authorization = \"Bearer ${{DOCS_TOKEN}}\" }}\nread_only = true\n"
        ),
    );
    let out = run_in(ws.path(), &["explain", "p.toml", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let explain = json_of(&out);
    let inv = &explain["invocations"][0];
    let files = inv["files"].to_string();
    assert!(
        files.contains("https://docs.example.com/mcp")
            && files.contains("${ORCH_MCP_DOCS_HEADER_0}")
            && !files.contains("DOCS_TOKEN"),
        "{files}"
    );
    assert_eq!(inv["env"]["ORCH_MCP_DOCS_HEADER_0"], "Bearer ${DOCS_TOKEN}");
    assert_eq!(
        explain["mcp_servers"][0]["headers"]["Authorization"],
        "Bearer ${DOCS_TOKEN}"
    );
}

#[test]
fn a_message_with_bytes_that_are_not_utf8_gets_a_tool_error_and_the_server_goes_on() {
    use std::io::{BufRead, BufReader, Write};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let (state, run) = state_with_a_run(dir.path());
    let argv = serve_argv(&state, &run, &ws, None);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |bytes: &[u8]| {
        stdin.write_all(bytes).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"add_comment\",\"arguments\":{\"text\":\"bad \xff\xfe bytes\"}}}");
    send(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"fine"}}}"#);
    let mut answers = std::collections::BTreeMap::new();
    while answers.len() < 3 {
        let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        answers.insert(v["id"].as_u64().unwrap(), v);
    }
    drop(stdin);
    child.wait().unwrap();
    let bad = &answers[&1]["result"];
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("not UTF-8"),
        "{bad}"
    );
    assert_eq!(answers[&2]["result"]["isError"], false);
    let conn = rusqlite::Connection::open(state.join("state.db")).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM reports", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "only the good comment is recorded");
}

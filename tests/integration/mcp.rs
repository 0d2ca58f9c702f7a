//! orch's MCP server over stdio, driven by clients orch did not write:
//! the official Python SDK and the MCP Inspector CLI (both installed by
//! `scripts/install-mcp-clients.sh`, which the test command runs).

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

use super::support::*;

/// An `orch run` whose phase `plan` has stand-ins for Claude Code
/// (`tests/mcp/stand_in_cli.py`) as its agents: each runs `client` (a JSON
/// argv in which "{server}" stands for orch's server command, from the MCP
/// configuration orch wrote for the attempt) as its MCP client, through the
/// relay to the attempt's endpoint, as every real CLI does.
struct Through {
    dir: tempfile::TempDir,
    out: std::process::Output,
}

impl Through {
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// What the client printed (of the stand-in named `out`).
    fn client(&self, out: &str) -> Value {
        let text = std::fs::read_to_string(self.ws().join(out))
            .unwrap_or_else(|e| panic!("{out}: {e}\n{}", stderr(&self.out)));
        serde_json::from_str(&text).unwrap_or_else(|e| {
            let err =
                std::fs::read_to_string(self.ws().join(format!("{out}.err"))).unwrap_or_default();
            panic!(
                "{out} is not JSON ({e}): {text}\n{err}\n{}",
                stderr(&self.out)
            )
        })
    }

    fn run_id(&self) -> String {
        json_of(&self.out)["run_id"].as_str().unwrap().to_string()
    }

    fn orch(&self, args: &[&str]) -> String {
        let out = orch()
            .arg("--state-dir")
            .arg(self.state())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    }
}

/// A run of the phase `plan` with the agents `names` (stand-ins, but for
/// those `extra_agents` declares), granted `mcp` of orch's tools, in a
/// workspace `prepare` fills first.
fn through(
    client: Value,
    mcp: &str,
    names: &[&str],
    extra_agents: &str,
    prepare: impl Fn(&Path),
) -> Through {
    through_then(client, mcp, names, extra_agents, "", prepare)
}

/// [`through`], with `then` (more agents and phases) after the phase.
fn through_then(
    client: Value,
    mcp: &str,
    names: &[&str],
    extra_agents: &str,
    then: &str,
    prepare: impl Fn(&Path),
) -> Through {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    prepare(&ws);
    std::fs::write(ws.join("client.json"), client.to_string()).unwrap();
    let stand_in = root().join("tests/mcp/stand_in_cli.py");
    let mut p = String::from("version = 1\nname = \"t\"\n[defaults]\nmax_parallel = 16\n");
    p.push_str(extra_agents);
    for n in names
        .iter()
        .filter(|n| !extra_agents.contains(&format!("[agents.{n}]")))
    {
        p.push_str(&format!(
            "[agents.{n}]\nkind = \"claude\"\nbinary = \"{}\"\n",
            stand_in.display()
        ));
    }
    p.push_str(&format!(
        "[[phases]]\nname = \"plan\"\nagents = {names:?}\nparallel = true\nmode = \"fix\"\nprompt = \"x\"\n\
         [phases.tools]\ninternal = [\"Read\", \"Write\"]\nmcp = {mcp}\npermission = \"workspace-write\"\n"
    ));
    p.push_str(then);
    std::fs::write(ws.join("p.toml"), p).unwrap();
    let child = orch()
        .current_dir(&ws)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["run", "p.toml", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish_within(child, std::time::Duration::from_secs(300), "orch run");
    Through { dir, out }
}

#[test]
fn the_python_sdk_lists_calls_and_is_refused_outside_the_scope() {
    let py = require!(Tool::McpClients).join("venv/bin/python");
    let calls = json!([
        ["log_decision", {"category": "library_choice", "question": "which MCP SDK", "options_considered": ["rmcp", "hand-written"], "chosen": "rmcp", "reasoning": "maintained"}],
        ["start_task", {"name": "n", "goal": "g"}],
        ["log_decision", {"category": "vibes"}],
        ["complete_phase", {"artifact_path": "../x.md", "artifact_hash": "0", "summary": "s", "confidence": "low"}],
        ["add_learning", {"pattern": "Run the MCP conformance checks before touching any tool schema in this repo", "learning_type": "convention", "applies_to": "src/mcp"}],
        ["approve_phase", {"phase": "plan", "artifact_hash": "0", "reason": "I approve myself"}]
    ]);
    let t = through(
        json!([
            py,
            root().join("tests/mcp/python_client.py"),
            calls.to_string(),
            "--",
            "{server}"
        ]),
        r#"["mcp__orch__log_decision", "mcp__orch__complete_phase", "mcp__orch__add_learning", "mcp__orch__approve_phase"]"#,
        &["claude"],
        "",
        |_| {},
    );
    assert!(t.out.status.success(), "{}", stderr(&t.out));
    let got = t.client("client-out.json");
    assert_eq!(got["server"], "orch");
    let names: Vec<&str> = got["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // The verdict is not a worker's, whatever its ToolSet says.
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
    assert_eq!(r[4]["is_error"], false, "{}", r[4]);
    assert!(
        r[5]["is_error"].as_bool().unwrap()
            && r[5]["text"].as_str().unwrap().contains("only for a judge"),
        "{}",
        r[5]
    );
    // The decision is in the run's record, stamped with the attempt orch
    // opened the endpoint for.
    let run = t.run_id();
    let conn = rusqlite::Connection::open(t.state().join("state.db")).unwrap();
    let (k, who, data): (String, String, String) = conn
        .query_row("SELECT kind, run_id || '/' || phase || '/' || agent || '/' || attempt, data_json FROM reports", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    assert_eq!(k, "decision");
    assert_eq!(who, format!("{run}/plan/claude/1"));
    assert!(data.contains("which MCP SDK"));

    // A person sees it too: `orch runs show` and `orch learnings search`.
    let shown = t.orch(&["runs", "show", &run]);
    assert!(
        shown.contains(
            "decisions\n  plan/claude#1  [library_choice] which MCP SDK -> rmcp: maintained"
        ),
        "{shown}"
    );
    assert!(shown.contains("learnings\n"), "{shown}");
    let json: Value =
        serde_json::from_str(&t.orch(&["runs", "show", &run, "--format", "json"])).unwrap();
    assert_eq!(json["reports"][0]["kind"], "decision");
    assert_eq!(json["reports"][0]["data"]["chosen"], "rmcp");
    assert_eq!(json["learnings"][0]["learning_type"], "convention");
    let found = t.orch(&["learnings", "search", "conformance schema"]);
    assert!(
        found.contains("[convention] (quality 50) Run the MCP conformance checks"),
        "{found}"
    );
    let none = orch()
        .arg("--state-dir")
        .arg(t.state())
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
    let inspector = require!(Tool::McpClients).join("node_modules/.bin/mcp-inspector");
    let t = through(
        json!([
            inspector,
            "--cli",
            "{server}",
            "--method",
            "tools/list",
            "--strict",
            "--format",
            "json"
        ]),
        r#"["mcp__orch__*"]"#,
        &["claude"],
        "",
        |_| {},
    );
    assert!(t.out.status.success(), "{}", stderr(&t.out));
    let got = t.client("client-out.json");
    let tools = got["result"]["tools"].as_array().unwrap();
    assert!(tools.len() >= 19, "{}", tools.len());
    assert_eq!(got.get("schemaFindings"), None, "{}", got["schemaFindings"]);
}

/// `n` `add_comment` calls, one per line.
fn comments(n: usize) -> String {
    (1..=n)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                   "params": {"name": "add_comment", "arguments": {"text": format!("comment {i}")}}})
            .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn eight_endpoints_and_the_engine_write_at_once_and_nothing_is_lost_or_doubled() {
    // In one parallel phase, a command agent prints lines (one event each)
    // until the eight stand-ins are done, while each of them sends 500
    // comments through its own endpoint at once.
    let names = ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7"];

    // Bounded: at most 60 s or 400,000 lines, whichever comes first.
    let talker = r#"
[agents.talker]
kind = "command"
command = ["python3", "-c", "import glob, sys, time\nend = time.time() + 60\nn = 0\nwhile len(glob.glob('out-*.err')) < 8 and time.time() < end and n < 400000:\n    print(f'line {n}')\n    n += 1\n    if n % 100 == 0:\n        sys.stdout.flush()\n        time.sleep(0.005)\nsys.stdout.flush()\nopen('count', 'w').write(str(n))\n"]
"#;
    let client = json!({"argv": ["python3", root().join("tests/mcp/raw_client.py"), "lines.txt", "--", "{server}"], "out": "{attempt}"});
    let mut all: Vec<&str> = names.to_vec();
    all.push("talker");
    let t = through(client, r#"["mcp__orch__*"]"#, &all, talker, |ws| {
        std::fs::write(ws.join("lines.txt"), comments(500)).unwrap();
    });
    assert!(t.out.status.success(), "{}", stderr(&t.out));
    let printed: u64 = std::fs::read_to_string(t.ws().join("count"))
        .unwrap()
        .parse()
        .unwrap();
    for n in names {
        let got = t.client(&format!("out-plan-{n}.json"));
        assert_eq!(got["unanswered"], json!([]), "{n}: {got}");
        for i in 1..=500 {
            assert_eq!(
                got["answers"][i.to_string()]["result"]["isError"],
                false,
                "{n}: {i}"
            );
        }
    }
    let run = t.run_id();
    let conn = rusqlite::Connection::open(t.state().join("state.db")).unwrap();
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
    assert_eq!(per_agent.len(), 8, "{per_agent:?}");
    assert!(per_agent.iter().all(|(_, n)| *n == 500), "{per_agent:?}");
    let events: u64 = conn
        .query_row(
            "SELECT count(*) FROM events e JOIN attempts a ON a.id = e.attempt_id
             WHERE a.run_id = ?1 AND a.agent = 'talker' AND e.kind = 'raw'",
            [&run],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, printed, "every line the agent printed is an event");
    assert!(printed > 0 && printed < 400_000, "{printed}");
    eprintln!("engine events while the endpoints wrote: {printed}");
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
    // orch starts them as written; the CLI (Claude Code's own config,
    // written by orch) reaches each through a relay to orch.
    let commands: Vec<String> = servers.iter().map(|s| s["command"].to_string()).collect();
    assert!(
        commands.iter().any(|c| c.contains("tavily-mcp@0.2.4"))
            && commands.iter().any(|c| c.contains("exa-mcp-server@2.0.0")),
        "{commands:?}"
    );
    let files = explain["invocations"][0]["files"].to_string();
    assert!(
        files.contains("mcp-tavily.sock") && files.contains("mcp-exa.sock"),
        "{files}"
    );
    assert!(!files.contains("TAVILY_API_KEY"), "{files}");

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

    // Declared in the pipeline with its word: it validates. orch talks to
    // it with its header; the CLI gets a relay to orch and neither the
    // address nor the header, in a file or in its environment.
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
        files.contains("mcp-docs.sock")
            && !files.contains("docs.example.com")
            && !files.contains("DOCS_TOKEN"),
        "{files}"
    );
    assert!(
        !inv["env"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.contains("HEADER") || k == "DOCS_TOKEN"),
        "{}",
        inv["env"]
    );
    assert_eq!(
        explain["mcp_servers"][0]["headers"]["Authorization"],
        "Bearer ${DOCS_TOKEN}"
    );
}

#[test]
fn every_broken_message_gets_an_error_and_the_endpoint_goes_on() {
    let lines: Vec<Vec<u8>> = vec![
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"add_comment\",\"arguments\":{\"text\":\"bad \xff\xfe bytes\"}}}".to_vec(),
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"fine"}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"\ud800"}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"x","n":1e400}}}"#.to_vec(),
        format!(r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"add_comment","arguments":{{"text":"x","deep":{}{}}}}}}}"#, "[".repeat(300), "]".repeat(300)).into_bytes(),
        b"this is not json".to_vec(),
        br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add_comment","arguments":["x"]}}"#.to_vec(),
        b"@big 20000000".to_vec(),
        b"@null 1".to_vec(),
        // `params` and `params._meta` that are not objects, for any method.
        br#"{"jsonrpc":"2.0","id":"p1","method":"tools/list","params":5}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":"p2","method":"ping","params":[]}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":"p3","method":"initialize","params":5}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":"p4","method":"tools/call","params":{"name":"add_comment","arguments":{"text":"x"},"_meta":5}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"still serving"}}}"#.to_vec(),
    ];
    let client = json!([
        "python3",
        root().join("tests/mcp/raw_client.py"),
        "lines.txt",
        "--",
        "{server}"
    ]);
    let t = through(client, r#"["mcp__orch__*"]"#, &["claude"], "", |ws| {
        std::fs::write(ws.join("lines.txt"), lines.join(&b"\n"[..])).unwrap();
    });
    assert!(t.out.status.success(), "{}", stderr(&t.out));
    let got = t.client("client-out.json");
    assert_eq!(got["unanswered"], json!([]), "{got}");
    assert_eq!(got["exited"], true, "the relay ends when its input does");
    let a = &got["answers"];
    let text = |id: &str| {
        a[id]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(a["1"]["result"]["isError"], true, "{}", a["1"]);
    assert!(text("1").contains("not UTF-8"), "{}", a["1"]);
    assert_eq!(a["2"]["result"]["isError"], false);
    for (id, code) in [
        ("3", -32700),
        ("4", -32700),
        ("5", -32700),
        ("6", -32602),
        ("7", -32602),
        ("big", -32600),
        ("p1", -32602),
        ("p2", -32602),
        ("p3", -32602),
        ("p4", -32602),
    ] {
        assert_eq!(a[id]["error"]["code"], code, "{id}: {}", a[id]);
    }
    assert_eq!(
        got["nulls"][0]["error"]["code"], -32700,
        "the line that is not JSON"
    );
    assert_eq!(
        got["nulls"].as_array().map(Vec::len),
        Some(1),
        "every other answer names its request: {}",
        got["nulls"]
    );
    assert_eq!(a["8"]["result"]["isError"], false, "{}", a["8"]);
    let conn = rusqlite::Connection::open(t.state().join("state.db")).unwrap();
    let texts: Vec<String> = conn
        .prepare("SELECT json_extract(data_json, '$.text') FROM reports ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        texts,
        ["fine", "still serving"],
        "only the good comments are recorded"
    );
}

/// A pipeline server that ends with a request in flight (it crashed, or
/// was killed) leaves no client waiting: under a grant of some of its
/// tools, orch answers what waits with an error, and either way the
/// client's side closes. (Round y: the client waited until its own
/// timeout, a minute for a CLI's tool call.)
#[test]
fn a_server_that_ends_mid_request_leaves_no_client_waiting() {
    let server = format!(
        "[mcp_servers.dies]\ncommand = [\"python3\", \"{}\"]\n",
        root().join("tests/mcp/dies_server.py").display()
    );
    let forks = format!(
        "[mcp_servers.dies]\ncommand = [\"python3\", \"{}\", \"--fork\"]\n",
        root().join("tests/mcp/dies_server.py").display()
    );
    let holds = forks.replace("--fork", "--hold");
    for (grant, server) in [
        (r#"["mcp__dies__echo"]"#, &server),
        (r#"["mcp__dies__*"]"#, &server),
        // It exits, but a child of its holds its output open.
        (r#"["mcp__dies__echo"]"#, &forks),
        // It exits, and a child of its holds its input, which orch is
        // writing a large message to, and its output.
        (r#"["mcp__dies__*"]"#, &holds),
    ] {
        let client = json!({
            "argv": ["python3", root().join("tests/mcp/raw_client.py"), "lines.txt", "--", "{server}"],
            "out": "client-out.json",
            "server": "dies",
        });
        let t = through(client, grant, &["claude"], server, |ws| {
            std::fs::write(
                ws.join("lines.txt"),
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{}}}\n@big 3000000\n@end",
            )
            .unwrap();
        });
        let got = t.client("client-out.json");
        assert_eq!(
            got["answers"]["init"]["result"]["serverInfo"]["name"], "dies",
            "{grant}: {got}"
        );
        assert_eq!(
            got["closed_first"], true,
            "{grant}: the client's side stays open: {got}"
        );
        if grant.contains("echo") {
            let a = &got["answers"]["1"];
            assert_eq!(a["error"]["code"], -32603, "{grant}: {got}");
            assert!(
                a["error"]["message"]
                    .as_str()
                    .unwrap_or("")
                    .contains("ended before it answered"),
                "{a}"
            );
        }
    }
}

/// The HTTP fixture (a remote MCP server on 127.0.0.1) started, logging to
/// `log`: the process, and the pipeline's table naming it as the remote
/// server `remote`.
fn remote_fixture(log: &Path) -> (std::process::Child, String) {
    let mut fixture = std::process::Command::new("python3")
        .arg(root().join("tests/e2e/mcp_fixture.py"))
        .args(["--http", "--max-seconds", "120"])
        .env("MCP_FIXTURE_LOG", log)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(fixture.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let port: u16 = first.trim().trim_start_matches("PORT=").parse().unwrap();
    let server =
        format!("[mcp_servers.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\nread_only = true\n");
    (fixture, server)
}

/// What the HTTP fixture logged.
fn fixture_log(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A client that leaves a remote server while an exchange runs: nothing
/// it queued is posted once its attempt has ended, and its session on the
/// server ends then, not when the exchange in flight ends (a server may
/// hold it open for orch's whole exchange limit), even when orch exits
/// right after (round z4). A client that only closes its input is still
/// answered what it sent before.
#[test]
fn a_client_that_leaves_a_remote_server_ends_its_session_at_once() {
    for (mode, seconds) in [("exit", "60"), ("close", "2")] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("remote.jsonl");
        let (mut fixture, server) = remote_fixture(&log);
        let client = json!({
            "argv": ["python3", root().join("tests/mcp/leave_client.py"), mode, seconds, "--", "{server}"],
            "out": "client-out.json",
            "server": "remote",
        });
        let started = std::time::Instant::now();
        let t = through(
            client,
            r#"["mcp__remote__hold", "mcp__remote__echo"]"#,
            &["claude"],
            &server,
            |_| {},
        );
        let took = started.elapsed();
        // A moment for a late post to show (none should).
        std::thread::sleep(std::time::Duration::from_millis(500));
        let _ = fixture.kill();
        let _ = fixture.wait();
        let got = fixture_log(&log);
        let at = |what: &str| {
            got.iter()
                .find(|e| e["tool"] == what || e["event"] == what)
                .and_then(|e| e["t"].as_f64())
        };
        let held = at("hold").unwrap_or_else(|| panic!("{mode}: no hold: {got:?}"));
        let ended = at("delete").unwrap_or_else(|| {
            panic!(
                "{mode}: the session never ended: {got:?}\n{}",
                stderr(&t.out)
            )
        });
        assert!(
            ended - held < 15.0,
            "{mode}: the session ended {:.1} s after the call began",
            ended - held
        );
        assert!(took.as_secs() < 40, "{mode}: orch ran {took:?}");
        let echoes = got.iter().filter(|e| e["tool"] == "echo").count();
        if mode == "exit" {
            assert_eq!(echoes, 0, "{mode}: posted after the attempt ended");
        } else {
            let answered = t.client("client-out.json");
            let answered = answered["answered"].as_array().unwrap();
            assert_eq!(echoes, 20, "{mode}: {got:?}");
            assert_eq!(answered.len(), 22, "{mode}: {answered:?}");
        }
    }
}

/// A client that leaves while its `initialize` is still on its way: the
/// session the server opens with its late answer is ended when that
/// answer comes (the poster, which ends sessions, had stopped knowing
/// none), while orch still runs the next phase.
#[test]
fn a_session_opened_after_its_client_left_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("remote.jsonl");
    let (mut fixture, server) = remote_fixture(&log);
    let client = json!({
        "argv": ["python3", root().join("tests/mcp/leave_client.py"), "init", "0", "--", "{server}"],
        "out": "client-out.json",
        "server": "remote",
    });
    // orch still runs (the next phase) when the late answer comes.
    let then = "[agents.wait]\nkind = \"command\"\ncommand = [\"sleep\", \"6\"]\n\
                [[phases]]\nname = \"after\"\nagents = [\"wait\"]\ndepends_on = [\"plan\"]\n";
    let t = through_then(
        client,
        r#"["mcp__remote__echo"]"#,
        &["claude"],
        &server,
        then,
        |_| {},
    );
    let _ = fixture.kill();
    let _ = fixture.wait();
    let got = fixture_log(&log);
    assert!(
        got.iter().any(|e| e["event"] == "delete"),
        "the session was never ended: {got:?}\n{}",
        stderr(&t.out)
    );
}

/// An attempt's endpoint serves 16 of its connections at once; the next
/// relay of the attempt is refused at once and says why (it read "serves
/// only the attempt it was opened for", as if it were another process).
#[test]
fn a_relay_past_the_connection_cap_is_told_why() {
    let t = through(
        json!({"argv": ["python3", root().join("tests/mcp/many_relays.py"), "16", "--", "{server}"], "out": "client-out.json"}),
        r#"["mcp__orch__*"]"#,
        &["claude"],
        "",
        |_| {},
    );
    let got = t.client("client-out.json");
    assert_eq!(got["answered"], 16, "{got}");
    assert_ne!(got["last_rc"], 0, "{got}");
    assert!(got["last_rc"].is_number(), "refused at once: {got}");
    let err = got["last_err"].as_str().unwrap();
    assert!(
        err.contains("serves at most 16 connections of an attempt"),
        "{err}"
    );
}

/// Exchanges a client left running count against its endpoint's 16
/// connections until they end: an agent that leaves connections
/// mid-exchange and opens new ones cannot pile up threads and sockets in
/// orch (round z5: 960 left in 20 s, held for 300 s); once they have
/// ended, new connections are served again.
#[test]
fn exchanges_left_running_count_against_the_connection_cap() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("remote.jsonl");
    let (mut fixture, server) = remote_fixture(&log);
    let client = json!({
        "argv": ["python3", root().join("tests/mcp/many_relays.py"), "16", "--leave", "12", "--", "{server}"],
        "out": "client-out.json",
        "server": "remote",
    });
    let t = through(
        client,
        r#"["mcp__remote__hold"]"#,
        &["claude"],
        &server,
        |_| {},
    );
    let _ = fixture.kill();
    let _ = fixture.wait();
    let held = fixture_log(&log)
        .iter()
        .filter(|e| e["tool"] == "hold")
        .count();
    assert_eq!(held, 16, "every call reached the server");
    let got = t.client("client-out.json");
    assert_eq!(got["last_answered"], false, "{got}");
    assert!(
        got["last_err"]
            .as_str()
            .unwrap()
            .contains("serves at most 16 connections"),
        "{got}"
    );
    // Once they have ended, the endpoint serves again.
    assert_eq!(got["after"], true, "{got}");
}

/// orch's own answers to a client of a remote server (a refused tool)
/// reach it under its own id, never as the answer to another request: a
/// refusal under the client's id 2 went through the narrowing meant for
/// the server's answers, where 2 was orch's id for the client's `"s"`.
#[test]
fn a_refusal_for_a_remote_server_answers_its_own_request() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fixture, server) = remote_fixture(&dir.path().join("remote.jsonl"));
    let client = json!({
        "argv": ["python3", root().join("tests/mcp/raw_client.py"), "lines.txt", "--", "{server}"],
        "out": "client-out.json",
        "server": "remote",
    });
    let t = through(
        client,
        r#"["mcp__remote__echo"]"#,
        &["claude"],
        &server,
        |ws| {
            std::fs::write(
            ws.join("lines.txt"),
            [
                r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"danger","arguments":{}}}"#,
            ]
            .join("\n"),
        )
        .unwrap();
        },
    );
    let _ = fixture.kill();
    let _ = fixture.wait();
    let got = t.client("client-out.json");
    let a = &got["answers"];
    assert_eq!(a["2"]["result"]["isError"], true, "{got}");
    assert!(a["2"].to_string().contains("`danger`"), "{got}");
    assert!(!a["s"].to_string().contains("danger"), "{got}");
    assert!(
        a["s"].to_string().contains("hi"),
        "the echo's own answer: {got}"
    );
}

/// A relay started by hand (outside the attempt's process tree) gets
/// nothing from the attempt's endpoint, whatever it sends; the attempt's
/// own relay, started by its CLI, is served (the control).
#[test]
fn a_relay_started_by_hand_gets_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(
        ws.join("lines.txt"),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_comment","arguments":{"text":"from the attempt"}}}"#,
    )
    .unwrap();
    // The stand-in's client says where its endpoint is, waits, then talks.
    let script = format!(
        "printf '%s' \"$4\" > socket.txt; while [ ! -e go ]; do sleep 0.05; done; exec python3 {} lines.txt -- \"$@\"",
        root().join("tests/mcp/raw_client.py").display()
    );
    std::fs::write(
        ws.join("client.json"),
        json!(["sh", "-c", script, "sh", "{server}"]).to_string(),
    )
    .unwrap();
    let stand_in = root().join("tests/mcp/stand_in_cli.py");
    std::fs::write(
        ws.join("p.toml"),
        format!(
            "version = 1\nname = \"t\"\n[agents.claude]\nkind = \"claude\"\nbinary = \"{}\"\n\
             [[phases]]\nname = \"plan\"\nagents = [\"claude\"]\nmode = \"fix\"\nprompt = \"x\"\n\
             [phases.tools]\ninternal = [\"Read\", \"Write\"]\nmcp = [\"mcp__orch__*\"]\npermission = \"workspace-write\"\n",
            stand_in.display()
        ),
    )
    .unwrap();
    let child = orch()
        .current_dir(&ws)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(["run", "p.toml", "--format", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let socket = loop {
        if let Ok(s) = std::fs::read_to_string(ws.join("socket.txt"))
            && !s.is_empty()
        {
            break s;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the attempt never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // By hand, with the attempt's endpoint and a well-formed request.
    let mut by_hand = orch()
        .args(["mcp", "relay", &socket])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = by_hand.stdin.take().unwrap();
        let _ = writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"x","version":"1"}}}}}}"#
        );
    }
    let refused = finish_within(by_hand, std::time::Duration::from_secs(20), "the relay");
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(refused.stdout.is_empty(), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains("without a word"),
        "{}",
        stderr(&refused)
    );
    // The attempt's own client goes on.
    std::fs::write(ws.join("go"), "").unwrap();
    let out = finish_within(child, std::time::Duration::from_secs(120), "orch run");
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value =
        serde_json::from_str(&std::fs::read_to_string(ws.join("client-out.json")).unwrap())
            .unwrap();
    assert_eq!(got["answers"]["1"]["result"]["isError"], false, "{got}");
    let conn = rusqlite::Connection::open(dir.path().join("state/state.db")).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM reports", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "only the attempt's own comment");
}

//! A remote MCP server (streamable HTTP, `url` and `headers` in the
//! pipeline) through each real CLI: the CLI reaches it with the header
//! orch set (its value from orch's environment, never in a config file),
//! and the model's call to its granted tool runs.

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use orch::model::AgentKind;
use serde_json::{Value, json};

use super::{Level, ModelServer, changed, find_cli, orch_run_with, pipeline, scratch};
use crate::support::{Tool, require, root};

/// The HTTP MCP fixture, stopped when dropped.
struct RemoteFixture {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl RemoteFixture {
    fn start(dir: &Path) -> Self {
        let log = dir.join("remote.jsonl");
        let mut child = Command::new("python3")
            .arg(root().join("tests/e2e/mcp_fixture.py"))
            .args(["--http", "--max-seconds", "300"])
            .env("MCP_FIXTURE_LOG", &log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = first.trim().trim_start_matches("PORT=").parse().unwrap();
        RemoteFixture { child, port, log }
    }

    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for RemoteFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const TOKEN: &str = "tok-e2e-remote-1234";

fn reaches_a_remote_server(kind: AgentKind) {
    let cli = find_cli(kind);
    let dir = scratch(&format!("orch-e2e-{kind}-remote-"));
    let remote = RemoteFixture::start(dir.path());
    let call = json!({"tool_call": {
        "name": ["mcp__remote.echo", "mcp__remote__echo", "mcp_remote_echo", "remote_echo", "remote-echo"],
        "arguments": {"text": "from-the-model"}
    }});
    let script = if kind == AgentKind::Codex {
        json!([{"tool_search": {"query": "echo"}}, call])
    } else {
        json!([call])
    };
    let server = ModelServer::start(dir.path(), &script);
    let mut text = changed(
        pipeline(&cli, Level::ReadOnly, &server, dir.path()),
        r#"mcp = ["mcp__fixture__echo"]"#,
        r#"mcp = ["mcp__remote__echo"]"#,
    );
    text.push_str(&format!(
        "\n[mcp_servers.remote]\nurl = \"http://127.0.0.1:{}/mcp\"\n\
         headers = {{ X-Fixture-Token = \"Bearer ${{FIXTURE_TOKEN}}\" }}\nread_only = true\n",
        remote.port
    ));
    let run = orch_run_with(
        &cli,
        dir.path(),
        &server,
        &text,
        &[("FIXTURE_TOKEN", Some(TOKEN))],
    );
    let ctx = run.context();
    let calls = remote.calls();
    assert_eq!(run.code, Some(0), "{ctx}\nremote: {calls:?}");
    let echo = calls
        .iter()
        .find(|c| c["tool"] == "echo")
        .unwrap_or_else(|| panic!("{kind} never called the remote tool: {ctx}\nremote: {calls:?}"));
    assert_eq!(echo["token"], format!("Bearer {TOKEN}"), "{ctx}");
    assert!(
        run.tool_results().contains("echo: from-the-model"),
        "the model got the answer: {ctx}"
    );
}

#[test]
fn claude_reaches_a_remote_mcp_server() {
    require!(Tool::AgentClis);
    reaches_a_remote_server(AgentKind::Claude);
}

#[test]
fn codex_reaches_a_remote_mcp_server() {
    require!(Tool::AgentClis);
    reaches_a_remote_server(AgentKind::Codex);
}

#[test]
fn gemini_reaches_a_remote_mcp_server() {
    require!(Tool::AgentClis);
    reaches_a_remote_server(AgentKind::Gemini);
}

#[test]
fn opencode_reaches_a_remote_mcp_server() {
    require!(Tool::AgentClis);
    reaches_a_remote_server(AgentKind::Opencode);
}

#[test]
fn copilot_reaches_a_remote_mcp_server() {
    require!(Tool::AgentClis);
    reaches_a_remote_server(AgentKind::Copilot);
}

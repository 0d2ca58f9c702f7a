//! End to end: the real agent CLIs, driven with the command lines orch
//! generates, against the scripted model endpoint (`tests/e2e/model_server.py`)
//! on 127.0.0.1, with a tiny MCP server (`tests/e2e/mcp_fixture.py`).
//!
//! For every CLI and every permission level it checks:
//! (a) the tools the model is offered match the ToolSet,
//! (b) a forbidden call (a write; a shell command) is refused and leaves no
//!     trace on disk,
//! (c) a permitted call works,
//! (d) an MCP tool outside the phase's `mcp` list is never called, while one
//!     inside it is.
//! The results, with the CLI versions, are `docs/enforcement.md`; the test
//! fails when that file is stale (`ORCH_UPDATE_DOCS=1` rewrites it).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use orch::agents::build::{self, Context};
use orch::agents::invocation::Stdin;
use orch::agents::probe::{self, run_bounded};
use orch::agents::{AgentKind, adapter};
use serde_json::{Value, json};

use crate::support::{clis_dir, root};

/// The scripted model endpoint, stopped when dropped.
struct ModelServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ModelServer {
    fn start(dir: &Path, script: &Value) -> Self {
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let log = dir.join("requests.jsonl");
        let mut child = Command::new("python3")
            .arg(root().join("tests/e2e/model_server.py"))
            .args(["--port", "0", "--max-seconds", "300", "--script"])
            .arg(&script_path)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the model server");
        let mut first = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let port = first
            .trim()
            .strip_prefix("PORT=")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("model server did not print its port: {first:?}"));
        ModelServer { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    ReadOnly,
    WorkspaceWrite,
    FullAccess,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::ReadOnly => "read-only",
            Level::WorkspaceWrite => "workspace-write",
            Level::FullAccess => "full-access",
        }
    }
}

/// How one CLI names things and how it is pointed at the local endpoint.
struct Cli {
    kind: AgentKind,
    model: &'static str,
    /// Tool names per canonical tool, as the model sees them.
    read: &'static [&'static str],
    write: &'static [&'static str],
    shell: &'static [&'static str],
    /// Whether the CLI hides tools the ToolSet does not grant (else it
    /// shows them and refuses the call).
    hides: bool,
    write_call: fn(&Path) -> Value,
    shell_call: fn(&str) -> Value,
    read_call: fn(&Path) -> Value,
}

fn call(name: &str, arguments: Value) -> Value {
    json!({ "tool_call": { "name": name, "arguments": arguments } })
}

const CONTENT: &str = "written by the scripted model";

fn clis() -> Vec<Cli> {
    vec![
        Cli {
            kind: AgentKind::Claude,
            model: "claude-sonnet-4-5",
            read: &["Read"],
            write: &["Write", "Edit"],
            shell: &["Bash"],
            hides: true,
            write_call: |p| call("Write", json!({"file_path": p, "content": CONTENT})),
            shell_call: |c| call("Bash", json!({"command": c, "description": "run it"})),
            read_call: |p| call("Read", json!({"file_path": p})),
        },
        Cli {
            kind: AgentKind::Codex,
            model: "gpt-5.5",
            read: &["exec_command"],
            write: &["apply_patch"],
            shell: &["exec_command"],
            hides: false,
            write_call: |p| {
                call(
                    "apply_patch",
                    json!(format!(
                        "*** Begin Patch\n*** Add File: {}\n+{CONTENT}\n*** End Patch\n",
                        p.display()
                    )),
                )
            },
            shell_call: |c| call("exec_command", json!({"cmd": c})),
            read_call: |p| {
                call(
                    "exec_command",
                    json!({"cmd": format!("cat {}", p.display())}),
                )
            },
        },
        Cli {
            kind: AgentKind::Gemini,
            model: "gemini-2.5-flash",
            read: &["read_file"],
            write: &["write_file", "replace"],
            shell: &["run_shell_command"],
            hides: true,
            write_call: |p| call("write_file", json!({"file_path": p, "content": CONTENT})),
            shell_call: |c| call("run_shell_command", json!({"command": c})),
            read_call: |p| call("read_file", json!({"file_path": p})),
        },
        Cli {
            kind: AgentKind::Opencode,
            model: "mock/mock-model",
            read: &["read"],
            write: &["write", "edit"],
            shell: &["bash"],
            hides: true,
            write_call: |p| call("write", json!({"filePath": p, "content": CONTENT})),
            shell_call: |c| call("bash", json!({"command": c, "description": "run it"})),
            read_call: |p| call("read", json!({"filePath": p})),
        },
        Cli {
            kind: AgentKind::Copilot,
            model: "claude-sonnet-4.5",
            read: &["view"],
            write: &["create", "edit"],
            shell: &["bash"],
            hides: true,
            write_call: |p| call("create", json!({"path": p, "file_text": CONTENT})),
            shell_call: |c| call("bash", json!({"command": c, "description": "run it"})),
            read_call: |p| call("view", json!({"path": p})),
        },
    ]
}

/// MCP tool names as the CLIs spell them; the endpoint calls the first one
/// the request offers.
fn mcp_call(tool: &str) -> Value {
    json!({ "tool_call": {
        "name": [
            // Codex: namespace `mcp__fixture`, tool `echo`, found by tool_search.
            format!("mcp__fixture.{tool}"),
            format!("mcp__fixture__{tool}"),
            format!("mcp_fixture_{tool}"),
            format!("fixture_{tool}"),
            format!("fixture-{tool}"),
            tool.to_string(),
        ],
        "arguments": {"text": format!("{tool}-from-the-model")}
    }})
}

/// The pipeline for one cell: one phase, this CLI, this level, the fixture
/// MCP server with only `echo` granted.
fn pipeline(cli: &Cli, level: Level, server: &ModelServer, dir: &Path) -> String {
    let kind = cli.kind.as_str();
    let internal = match (level, cli.kind) {
        (Level::ReadOnly, _) => r#"["Read", "Glob", "Grep"]"#,
        // Codex's shell cannot be limited to patterns: it needs plain Bash.
        (_, AgentKind::Codex) => r#"["Read", "Write", "Edit", "Glob", "Grep", "Bash"]"#,
        (Level::WorkspaceWrite, _) => {
            r#"["Read", "Write", "Edit", "Glob", "Grep", "Bash(printf *)"]"#
        }
        (Level::FullAccess, _) => r#"["Read", "Write", "Edit", "Glob", "Grep", "Bash"]"#,
    };
    let mode = if level == Level::ReadOnly {
        "audit"
    } else {
        "fix"
    };
    let url = server.url();
    let mut agent = format!("[agents.{kind}]\nmodel = \"{}\"\n", cli.model);
    match cli.kind {
        AgentKind::Claude => agent.push_str(
            "env = { CLAUDE_CODE_MAX_RETRIES = \"0\", DISABLE_TELEMETRY = \"1\", DISABLE_ERROR_REPORTING = \"1\" }\n",
        ),
        AgentKind::Codex => {
            let _ = writeln!(
                agent,
                "env = {{ MOCK_API_KEY = \"sk-test-local\" }}\n[agents.codex.modes.{mode}]\nflags = [\
                 \"-c\", \"model_provider=\\\"mock\\\"\", \
                 \"-c\", \"model_providers.mock.name=\\\"mock\\\"\", \
                 \"-c\", \"model_providers.mock.base_url=\\\"{url}/v1\\\"\", \
                 \"-c\", \"model_providers.mock.env_key=\\\"MOCK_API_KEY\\\"\", \
                 \"-c\", \"model_providers.mock.wire_api=\\\"responses\\\"\", \
                 \"-c\", \"model_providers.mock.request_max_retries=0\", \
                 \"-c\", \"model_providers.mock.stream_max_retries=0\", \
                 \"-c\", \"check_for_update_on_startup=false\", \
                 \"-c\", \"analytics.enabled=false\"]"
            );
        }
        AgentKind::Opencode => {
            let config = dir.join("opencode-provider.json");
            std::fs::write(
                &config,
                json!({
                    "model": "mock/mock-model",
                    "small_model": "mock/mock-model",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": format!("{url}/v1"), "apiKey": "sk-test-local"},
                        "models": {"mock-model": {"name": "Mock model", "tool_call": true}}
                    }}
                })
                .to_string(),
            )
            .unwrap();
            let _ = writeln!(agent, "env = {{ OPENCODE_CONFIG = \"{}\" }}", config.display());
        }
        _ => {}
    }
    format!(
        r#"version = 1
name = "e2e"

{agent}
[mcp_servers.fixture]
command = ["python3", "{fixture}"]
env = {{ MCP_FIXTURE_LOG = "{mcp_log}" }}

[[phases]]
name = "cell"
agents = ["{kind}"]
mode = "{mode}"
prompt = "Follow the scripted model."
[phases.tools]
internal = {internal}
mcp = ["mcp__fixture__echo"]
permission = "{level}"
max_turns = 10
"#,
        fixture = root().join("tests/e2e/mcp_fixture.py").display(),
        mcp_log = dir.join("mcp-calls.jsonl").display(),
        level = level.as_str(),
    )
}

/// What one run of the CLI showed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    requests: Vec<Value>,
}

impl Run {
    /// Tool names offered in the first request that offered any.
    fn offered(&self) -> Vec<String> {
        self.requests
            .iter()
            .find(|r| !r["side"].as_bool().unwrap_or(false))
            .map(|r| {
                r["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Text of every tool result the CLI sent back to the model.
    fn tool_results(&self) -> String {
        self.requests
            .iter()
            .flat_map(|r| r["tool_results"].as_array().cloned().unwrap_or_default())
            .map(|t| t["text"].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn context(&self) -> String {
        format!(
            "exit {:?}\noffered: {:?}\ntool results: {}\nstderr tail: {}\nstdout tail: {}",
            self.code,
            self.offered(),
            self.tool_results(),
            tail(&self.stderr),
            tail(&self.stdout)
        )
    }
}

fn tail(s: &str) -> &str {
    &s[s.len().saturating_sub(1500)..]
}

/// Run the CLI for one cell with this script.
fn run_cell(cli: &Cli, level: Level, dir: &Path, script: Value) -> Run {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let server = ModelServer::start(dir, &script);
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, pipeline(cli, level, &server, dir)).unwrap();
    let loaded = orch::pipeline::load(&file).unwrap_or_else(|e| {
        panic!(
            "{:#?}",
            e.diagnostics
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
        )
    });
    let p = &loaded.pipeline;
    let (phase, agent) = p.invocations().next().unwrap();
    let mut settings = orch::settings::Settings {
        state_dir: dir.join("state"),
        ..Default::default()
    };
    let bin = clis_dir().join("node_modules/.bin");
    for a in settings.agents.values_mut() {
        a.binary = bin.join(&a.binary).display().to_string();
    }
    let mut ctx = Context::new(settings, work.clone());
    ctx.orch_exe = env!("CARGO_BIN_EXE_orch").to_string();
    let inv = build::invocation(p, phase, agent, &ctx);
    probe::write_files(&inv).unwrap();

    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let lookup = |name: &str| -> Option<String> {
        match name {
            "PATH" => Some(path.clone()),
            "ANTHROPIC_BASE_URL" | "GOOGLE_GEMINI_BASE_URL" => Some(server.url()),
            "COPILOT_PROVIDER_BASE_URL" => Some(format!("{}/v1", server.url())),
            "ANTHROPIC_API_KEY" | "GEMINI_API_KEY" | "COPILOT_PROVIDER_API_KEY" => {
                Some("sk-test-local".into())
            }
            "COPILOT_OFFLINE" => Some("true".into()),
            "COPILOT_MODEL" => Some(cli.model.into()),
            "COPILOT_CACHE_HOME" => Some(clis_dir().join("copilot-cache").display().to_string()),
            "TMPDIR" => Some(dir.join("tmp").display().to_string()),
            _ => None,
        }
    };
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args).current_dir(&inv.cwd).env_clear();
    for var in &inv.env {
        if let Some(v) = var.resolve(lookup) {
            cmd.env(&var.name, v);
        }
    }
    let stdin = match &inv.stdin {
        Stdin::Null => None,
        Stdin::Text(t) => Some(t.as_str()),
    };
    let out = run_bounded(cmd, stdin, Duration::from_secs(120)).unwrap();
    assert!(
        !out.timed_out,
        "{} {} timed out:\n{}",
        cli.kind,
        level.as_str(),
        tail(&out.stderr)
    );
    // A CLI that says it runs with weaker rules than asked fails the run
    // (agent-clis.md rule 3).
    let weakened: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| adapter(cli.kind).weakened(l).is_some())
        .collect();
    assert!(
        weakened.is_empty(),
        "{} {}: the CLI weakened its rules: {weakened:?}",
        cli.kind,
        level.as_str()
    );
    Run {
        code: out.code,
        stdout: out.stdout,
        stderr: out.stderr,
        requests: server.requests(),
    }
}

/// The outcome of one check, for the matrix.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
}

fn check(name: &'static str, ok: bool, detail: impl Into<String>) -> Check {
    Check {
        name,
        ok,
        detail: detail.into(),
    }
}

/// All checks of one (CLI, level) cell.
fn cell(cli: &Cli, level: Level) -> Vec<Check> {
    let mut checks = Vec::new();
    let base = tempfile::Builder::new()
        .prefix(&format!("orch-e2e-{}-{}-", cli.kind, level.as_str()))
        .tempdir_in(
            std::env::var_os("ORCH_E2E_TMP")
                .map(PathBuf::from)
                .unwrap_or_else(std::env::temp_dir),
        )
        .unwrap();
    let outside = base.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let sub = |name: &str| {
        let d = base.path().join(name);
        std::fs::create_dir_all(d.join("work")).unwrap();
        d
    };

    // (b) a forbidden write, and (a) what the model saw.
    let d = sub("write");
    let target = match level {
        Level::ReadOnly => d.join("work/forbidden.txt"),
        Level::WorkspaceWrite => outside.join("forbidden.txt"),
        Level::FullAccess => outside.join("allowed.txt"),
    };
    let run = run_cell(cli, level, &d, json!([(cli.write_call)(&target)]));
    let offered = run.offered();
    let sees = |names: &[&str]| names.iter().any(|n| offered.iter().any(|o| o == n));
    let a_ok = sees(cli.read)
        && match level {
            Level::ReadOnly => !cli.hides || (!sees(cli.write) && !sees(cli.shell)),
            _ => sees(cli.write) && sees(cli.shell),
        };
    checks.push(check(
        "sees",
        a_ok,
        format!("offered {}", offered.join(", ")),
    ));
    match level {
        Level::FullAccess => checks.push(check(
            "write outside",
            target.exists(),
            "a write outside the workspace works",
        )),
        _ => checks.push(check(
            "forbidden write",
            !target.exists(),
            if level == Level::ReadOnly {
                "a write in the workspace is refused"
            } else {
                "a write outside the workspace is refused"
            },
        )),
    }
    if !checks.iter().all(|c| c.ok) {
        checks.push(check("context", false, run.context()));
    }

    // (b) a forbidden shell command / (c) a permitted one.
    let d = sub("shell");
    let (marker, expect) = match (level, cli.kind) {
        (Level::ReadOnly, _) => (d.join("work/shell-marker"), false),
        (Level::WorkspaceWrite, AgentKind::Codex) => (outside.join("shell-marker"), false),
        (Level::WorkspaceWrite, _) => (d.join("work/shell-marker"), false),
        (Level::FullAccess, _) => (d.join("work/shell-marker"), true),
    };
    let command = format!("touch {}", marker.display());
    let run = run_cell(cli, level, &d, json!([(cli.shell_call)(&command)]));
    let ok = marker.exists() == expect;
    checks.push(check(
        if expect { "shell" } else { "forbidden shell" },
        ok,
        if expect {
            "a shell command runs".to_string()
        } else if level == Level::WorkspaceWrite {
            "a shell command outside the granted patterns (or the workspace) is refused".to_string()
        } else {
            "a shell command is refused".to_string()
        },
    ));
    if !ok {
        checks.push(check("context", false, run.context()));
    }

    // (c) a permitted call.
    let d = sub("permitted");
    let run;
    let ok = match level {
        Level::ReadOnly => {
            let given = d.join("work/given.txt");
            std::fs::write(&given, "orch-fixture-content\n").unwrap();
            run = run_cell(cli, level, &d, json!([(cli.read_call)(&given)]));
            run.tool_results().contains("orch-fixture-content")
        }
        _ => {
            let target = d.join("work/permitted.txt");
            run = run_cell(cli, level, &d, json!([(cli.write_call)(&target)]));
            std::fs::read_to_string(&target).is_ok_and(|t| t.contains(CONTENT))
        }
    };
    checks.push(check(
        "permitted",
        ok,
        if level == Level::ReadOnly {
            "a read in the workspace works"
        } else {
            "a write in the workspace works"
        },
    ));
    if !ok {
        checks.push(check("context", false, run.context()));
    }

    // (d) MCP: `echo` is granted, `danger` is not.
    let d = sub("mcp");
    // Codex defers MCP tools behind its client-side tool_search: a model
    // searches first, as a real one would.
    let script = if cli.kind == AgentKind::Codex {
        json!([
            {"tool_search": {"query": "echo"}},
            mcp_call("echo"),
            {"tool_search": {"query": "danger"}},
            mcp_call("danger")
        ])
    } else {
        json!([mcp_call("echo"), mcp_call("danger")])
    };
    let run = run_cell(cli, level, &d, script);
    let calls = std::fs::read_to_string(d.join("mcp-calls.jsonl")).unwrap_or_default();
    let called = |tool: &str| calls.contains(&format!("\"tool\": \"{tool}\""));
    let ok = called("echo") && !called("danger");
    checks.push(check(
        "mcp",
        ok,
        format!(
            "granted tool called: {}; other tool called: {}",
            called("echo"),
            called("danger")
        ),
    ));
    if !ok {
        checks.push(check(
            "context",
            false,
            format!("{}\nfixture log: {calls}", run.context()),
        ));
    }
    checks
}

fn versions() -> Vec<(AgentKind, String)> {
    let bin = clis_dir().join("node_modules/.bin");
    clis()
        .iter()
        .map(|c| {
            let i = probe::installed(c.kind, bin.join(c.kind.as_str()).to_str().unwrap());
            (c.kind, i.version.unwrap_or_else(|| "?".into()))
        })
        .collect()
}

fn matrix(results: &[(AgentKind, Level, Vec<Check>)]) -> String {
    let mut out = String::from(
        "# Enforcement, as the real CLIs do it\n\n\
         Written by the end-to-end suite (`tests/integration/e2e.rs`), which runs\n\
         each CLI with the command line orch generates against a scripted model on\n\
         127.0.0.1 and a small MCP server; a test fails when this file is stale\n\
         (`ORCH_UPDATE_DOCS=1 scripts/test e2e` rewrites it). What orch claims for\n\
         each field is in `capabilities.md`.\n\n\
         Each cell: **sees**, the model is offered the granted tools (and, under\n\
         read-only, no writing or shell tool where the CLI hides what is not\n\
         granted); **write**, a forbidden write is refused and leaves no file\n\
         (under full-access: a write outside the workspace works); **shell**, a\n\
         forbidden command is refused and leaves no trace (under full-access: it\n\
         runs); **permitted**, a granted read (read-only) or write in the\n\
         workspace works; **mcp**, the granted MCP tool is called and the other\n\
         one never is.\n\n",
    );
    out.push_str("| CLI | version | level | sees | write | shell | permitted | mcp |\n|---|---|---|---|---|---|---|---|\n");
    let versions = versions();
    for (kind, level, checks) in results {
        let mark = |column: &str| {
            checks
                .iter()
                .find(|c| c.name != "context" && c.name.contains(column))
                .map_or("?", |c| if c.ok { "yes" } else { "**NO**" })
        };
        let version = versions
            .iter()
            .find(|(k, _)| k == kind)
            .map_or("?", |(_, v)| v.as_str());
        let _ = writeln!(
            out,
            "| {kind} | {version} | {} | {} | {} | {} | {} | {} |",
            level.as_str(),
            mark("sees"),
            mark("write"),
            mark("shell"),
            mark("permitted"),
            mark("mcp"),
        );
    }
    out
}

#[test]
fn enforcement_matrix_on_the_real_clis() {
    let levels = [Level::ReadOnly, Level::WorkspaceWrite, Level::FullAccess];
    let only: Option<String> = std::env::var("ORCH_E2E_ONLY").ok();
    let mut results = Vec::new();
    for cli in clis() {
        if only.as_deref().is_some_and(|o| o != cli.kind.as_str()) {
            continue;
        }
        for level in levels {
            results.push((cli.kind, level, cell(&cli, level)));
        }
    }
    let mut failures = String::new();
    for (kind, level, checks) in &results {
        for c in checks.iter().filter(|c| !c.ok) {
            let _ = writeln!(
                failures,
                "{kind} {}: {}: {}",
                level.as_str(),
                c.name,
                c.detail
            );
        }
    }
    let doc = matrix(&results);
    if only.is_none() {
        let path = root().join("docs/enforcement.md");
        if std::env::var_os("ORCH_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &doc).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        if checked_in != doc {
            let _ = writeln!(
                failures,
                "docs/enforcement.md is stale; rerun with ORCH_UPDATE_DOCS=1. Now:\n{doc}"
            );
        }
    }
    assert!(failures.is_empty(), "{failures}\n{doc}");
}

/// `orch run` with a real CLI, start to end: run it, then read the run
/// back from the store.
fn orch_run(
    cli: &Cli,
    dir: &Path,
    server: &ModelServer,
    pipeline: &str,
) -> (std::process::Output, Value) {
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let file = dir.join("pipeline.toml");
    std::fs::write(&file, pipeline).unwrap();
    let bin = clis_dir().join("node_modules/.bin");
    let out = Command::new(env!("CARGO_BIN_EXE_orch"))
        .current_dir(&work)
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("XDG_CONFIG_HOME", dir.join("no-config"))
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-test-local")
        .args(["--state-dir", dir.join("state").to_str().unwrap()])
        .args([
            "--agent-binary",
            &format!("{}={}", cli.kind, bin.join(cli.kind.as_str()).display()),
        ])
        .args([
            "run",
            file.to_str().unwrap(),
            "--format",
            "json",
            "--grace",
            "1",
        ])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out, report)
}

fn find_cli(kind: AgentKind) -> Cli {
    clis().into_iter().find(|c| c.kind == kind).unwrap()
}

#[test]
fn orch_run_records_a_real_claude_session() {
    let cli = find_cli(AgentKind::Claude);
    let dir = tempfile::tempdir().unwrap();
    let given = dir.path().join("work/given.txt");
    std::fs::create_dir_all(dir.path().join("work")).unwrap();
    std::fs::write(&given, "orch-fixture-content\n").unwrap();
    let server = ModelServer::start(dir.path(), &json!([(cli.read_call)(&given)]));
    let text = pipeline(&cli, Level::ReadOnly, &server, dir.path());
    let (out, report) = orch_run(&cli, dir.path(), &server, &text);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        report
    );
    let agent = &report["phases"][0]["agents"][0];
    assert_eq!(agent["status"], "succeeded", "{report}");
    assert!(
        agent["session_id"].as_str().is_some_and(|s| !s.is_empty()),
        "{agent}"
    );
    assert!(agent["tokens_in"].as_u64().unwrap() > 0, "{agent}");
    assert!(agent["turns"].as_u64().unwrap() >= 1, "{agent}");
    assert!(agent["cost_usd"].as_f64().is_some(), "{agent}");
    // The recorded events, read back through `orch runs events`.
    let events = Command::new(env!("CARGO_BIN_EXE_orch"))
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .args(["runs", "events", "latest", "--format", "json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&events.stdout);
    assert!(
        text.contains("\"tool_call\"") && text.contains("\"session_start\""),
        "{text}"
    );
    assert!(
        text.contains("orch-fixture-content"),
        "the tool result is recorded: {text}"
    );
}

#[test]
fn orch_stops_codex_at_its_turn_limit() {
    // Codex has no turn limit of its own: orch counts and stops it.
    let cli = find_cli(AgentKind::Codex);
    let dir = tempfile::tempdir().unwrap();
    let calls: Vec<Value> = (1..=5)
        .map(|i| (cli.shell_call)(&format!("echo step-{i}")))
        .collect();
    let server = ModelServer::start(dir.path(), &json!(calls));
    let text = pipeline(&cli, Level::WorkspaceWrite, &server, dir.path())
        .replace("max_turns = 10", "max_turns = 2");
    let (out, report) = orch_run(&cli, dir.path(), &server, &text);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agent = &report["phases"][0]["agents"][0];
    assert_eq!(agent["status"], "failed", "{report}");
    assert!(
        agent["reason"]
            .as_str()
            .unwrap_or("")
            .contains("turn limit 2 reached (enforced by orch)"),
        "{agent}"
    );
    let answered = server
        .requests()
        .iter()
        .filter(|r| !r["side"].as_bool().unwrap_or(false))
        .count();
    assert!(
        answered < 5,
        "codex was stopped before the script ran out: {answered} requests"
    );
}

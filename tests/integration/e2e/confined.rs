//! The confinement cells: `orch run` with each real CLI, where the CLI's own
//! rules let a command run and only the OS stands between it and a write
//! (or a read of the user's secrets):
//!
//! - **pattern**: read-only with granted command patterns whose commands
//!   write (an interpreter, `sed -i`, `tee`, `cp`, `git log --output`):
//!   every write is refused and leaves no file;
//! - **inside** / **outside**: workspace-write with unrestricted `Bash`: a
//!   shell write in the workspace works; one to a folder elsewhere and one
//!   into the real home are refused;
//! - **home**: read-only: a stand-in secret in the real home cannot be read,
//!   by the shell or the CLI's read tool;
//! - **mcp write**: read-only granting a stdio MCP server's tool that writes a
//!   file: the server runs confined with the agent and the write is refused;
//! - **off**: the same pipelines with `confinement = "off"` fail validation,
//!   naming what nothing could confine (for Codex, whose own sandbox holds
//!   its shell, only the one granting an MCP server's tool).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use orch::agents::probe::run_bounded;
use orch::confine::Launch;
use orch::model::AgentKind;
use serde_json::{Value, json};

use super::{Check, Cli, Level, ModelServer, OrchRun, check, orch_run, pipeline, scratch};

/// What the stand-in secret in the real home holds.
const SECRET: &str = "orch-stand-in-secret";

/// What the workspace's given file holds (a `sed -i` must not change it).
const GIVEN: &str = "given-content";

/// `text` with the line that sets `key` in the phase's tools replaced.
fn set_tools_line(text: &str, key: &str, value: &str) -> String {
    let prefix = format!("{key} = ");
    let mut found = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with(&prefix) {
                found = true;
                format!("{key} = {value}")
            } else {
                l.to_string()
            }
        })
        .collect();
    assert!(found, "no `{key}` line in the pipeline:\n{text}");
    out.join("\n") + "\n"
}

/// A run's fixture, shell and endpoint, ready for one cell.
struct Cell<'a> {
    cli: &'a Cli,
    dir: tempfile::TempDir,
}

impl<'a> Cell<'a> {
    fn new(cli: &'a Cli, name: &str) -> Self {
        let dir = scratch(&format!("orch-e2e-{}-{name}-", cli.kind));
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::create_dir_all(dir.path().join("user-home/.ssh")).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        Cell { cli, dir }
    }

    fn work(&self) -> std::path::PathBuf {
        self.dir.path().join("work")
    }

    /// The real user's home of the run (orch's HOME).
    fn home(&self) -> std::path::PathBuf {
        self.dir.path().join("user-home")
    }

    fn shell(&self, command: &str) -> Value {
        (self.cli.shell_call)(command)
    }

    /// The pipeline for `level` with these tools.
    fn pipeline(&self, server: &ModelServer, level: Level, internal: &str, mcp: &str) -> String {
        let text = pipeline(self.cli, level, server, self.dir.path());
        let text = set_tools_line(&text, "internal", internal);
        set_tools_line(&text, "mcp", mcp)
    }

    /// `orch run` of the pipeline for `level` with these tools and this
    /// script; also returns the pipeline, for the `off` check.
    fn run(&self, level: Level, internal: &str, mcp: &str, script: Value) -> (OrchRun, String) {
        let server = ModelServer::start(self.dir.path(), &script);
        let text = self.pipeline(&server, level, internal, mcp);
        (orch_run(self.cli, self.dir.path(), &server, &text), text)
    }
}

/// `orch validate` of `pipeline` with confinement off: refused, saying
/// nothing confines it (or, with `refused` false, valid)? `Err` holds what
/// it said otherwise.
fn without_confinement(dir: &Path, pipeline: &str, refused: bool) -> Result<(), String> {
    let file = dir.join("off.toml");
    std::fs::write(&file, pipeline).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orch"));
    cmd.env("ORCH_CONFINEMENT", "off")
        .env("COLUMNS", "400")
        .args(["validate", "--format", "json", file.to_str().unwrap()]);
    let out = run_bounded(
        Launch::from_command(&cmd, true),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    let report: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    let says = report["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|d| {
            let m = d["message"].as_str().unwrap_or("");
            d["code"] == "orch::pipeline::unenforceable"
                && m.contains("`permission` is not enforced")
                && m.contains("nothing confines it")
                && m.contains("confinement = \"off\"")
        });
    if (refused && out.code == Some(2) && says) || (!refused && out.code == Some(0)) {
        Ok(())
    } else {
        Err(format!("exit {:?}: {}", out.code, out.stdout))
    }
}

/// Whether the run's agent answered every one of `n` scripted calls (the
/// calls were made, and turned down or run).
fn answered(run: &OrchRun, n: usize) -> bool {
    run.requests
        .iter()
        .filter(|r| r["has_tool_result"] == true)
        .count()
        >= n
}

/// Every confinement cell of one CLI, each a [`Check`] named after its
/// column.
pub(super) fn cells(cli: &Cli) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut off: Vec<String> = Vec::new();
    // Without orch's confinement, Codex's own OS sandbox still holds its
    // shell (not the MCP servers it starts, which run outside it).
    let mut note_off = |what: &str, dir: &Path, text: &str| {
        let refused = cli.kind != AgentKind::Codex || what == "mcp";
        if let Err(e) = without_confinement(dir, text, refused) {
            off.push(format!("{what}: {e}"));
        }
    };

    // pattern: read-only, the CLI lets these commands run.
    {
        let c = Cell::new(cli, "pattern");
        let work = c.work();
        std::fs::write(work.join("given.txt"), format!("{GIVEN}\n")).unwrap();
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&work)
            .status()
            .unwrap();
        assert!(git.success());
        let ok = Command::new("git")
            .args([
                "-c",
                "user.email=t@example.com",
                "-c",
                "user.name=t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "start",
            ])
            .current_dir(&work)
            .status()
            .unwrap();
        assert!(ok.success());
        let w = work.display();
        let commands = [
            format!("python3 -c \"open('{w}/py.txt','w').write('x')\""),
            format!("sed -i s/given/changed/ {w}/given.txt"),
            format!("tee {w}/tee.txt < {w}/given.txt"),
            format!("cp {w}/given.txt {w}/cp.txt"),
            format!("git log --output={w}/git.txt"),
        ];
        let script: Vec<Value> = commands.iter().map(|cmd| c.shell(cmd)).collect();
        // Codex cannot limit its shell to commands (a pattern would be
        // refused): it gets its whole shell, which the OS holds the same.
        let internal = if cli.kind == AgentKind::Codex {
            r#"["Read", "Glob", "Grep", "Bash"]"#
        } else {
            r#"["Read", "Glob", "Grep", "Bash(python3 *)", "Bash(sed *)", "Bash(tee *)", "Bash(cp *)", "Bash(git *)"]"#
        };
        let (run, text) = c.run(Level::ReadOnly, internal, "[]", json!(script));
        let written: Vec<&str> = ["py.txt", "tee.txt", "cp.txt", "git.txt"]
            .into_iter()
            .filter(|f| work.join(f).exists())
            .collect();
        let given = std::fs::read_to_string(work.join("given.txt")).unwrap_or_default();
        let ok = written.is_empty() && given.contains(GIVEN) && answered(&run, commands.len());
        checks.push(check(
            "pattern",
            ok,
            format!(
                "read-only with write-capable command patterns: files written {written:?}, given.txt {given:?}; {}",
                os_refusals(&run)
            ),
        ));
        if !ok {
            checks.push(check("context", false, run.context()));
        }
        note_off("pattern", c.dir.path(), &text);
    }

    // inside / outside: workspace-write with unrestricted Bash.
    {
        let c = Cell::new(cli, "shell");
        let inside = c.work().join("inside.txt");
        let elsewhere = c.dir.path().join("elsewhere/out.txt");
        let home = c.home().join("planted.txt");
        let script = json!([
            c.shell(&format!("echo inside > {}", inside.display())),
            c.shell(&format!("echo out > {}", elsewhere.display())),
            c.shell(&format!("echo home > {}", home.display())),
        ]);
        let internal = r#"["Read", "Write", "Edit", "Glob", "Grep", "Bash"]"#;
        let (run, text) = c.run(Level::WorkspaceWrite, internal, "[]", script);
        checks.push(check(
            "inside",
            inside.exists(),
            "workspace-write with Bash: a shell write in the workspace works",
        ));
        let ok = !elsewhere.exists() && !home.exists() && answered(&run, 3);
        checks.push(check(
            "outside",
            ok,
            format!(
                "a shell write to another folder ({}) and into the real home ({}) is refused; {}",
                elsewhere.exists(),
                home.exists(),
                os_refusals(&run)
            ),
        ));
        if !inside.exists() || !ok {
            checks.push(check("context", false, run.context()));
        }
        note_off("shell", c.dir.path(), &text);
    }

    // home: read-only, a secret in the real home.
    {
        let c = Cell::new(cli, "home");
        let secret = c.home().join(".ssh/id_ed25519");
        std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
        let script = json!([
            c.shell(&format!("cat {}", secret.display())),
            (cli.read_call)(&secret),
        ]);
        let internal = if cli.kind == AgentKind::Codex {
            r#"["Read", "Glob", "Grep", "Bash"]"#
        } else {
            r#"["Read", "Glob", "Grep", "Bash(cat *)"]"#
        };
        let (run, text) = c.run(Level::ReadOnly, internal, "[]", script);
        let leaked = run.tool_results().contains(SECRET);
        let ok = !leaked && answered(&run, 2);
        checks.push(check(
            "home",
            ok,
            format!("a file in the real home cannot be read (leaked: {leaked})"),
        ));
        if !ok {
            checks.push(check("context", false, run.context()));
        }
        note_off("home", c.dir.path(), &text);
    }

    // mcp write: a stdio MCP tool that writes, under read-only.
    {
        let c = Cell::new(cli, "mcp");
        let target = c.work().join("from-mcp.txt");
        let call = json!({ "tool_call": {
            "name": [
                "mcp__fixture.write", "mcp__fixture__write", "mcp_fixture_write",
                "fixture_write", "fixture-write", "write"
            ],
            "arguments": {"path": target.display().to_string(), "text": "x"}
        }});
        let script = if cli.kind == AgentKind::Codex {
            json!([{"tool_search": {"query": "write"}}, call])
        } else {
            json!([call])
        };
        let (run, text) = c.run(
            Level::ReadOnly,
            r#"["Read", "Glob", "Grep"]"#,
            r#"["mcp__fixture__write"]"#,
            script,
        );
        let calls = run.fixture_calls();
        let refused = calls.iter().any(|r| {
            r["tool"] == "write"
                && r["result"]
                    .as_str()
                    .is_some_and(|t| t.contains("Permission denied"))
        });
        let ok = refused && !target.exists();
        checks.push(check(
            "mcp write",
            ok,
            format!("the fixture's write tool was called and refused by the OS: {calls:?}"),
        ));
        if !ok {
            checks.push(check("context", false, run.context()));
        }
        note_off("mcp", c.dir.path(), &text);
    }

    checks.push(check(
        "off",
        off.is_empty(),
        if off.is_empty() {
            "with confinement off, validation refuses every pipeline above".to_string()
        } else {
            format!(
                "with confinement off, validation did not refuse: {}",
                off.join("; ")
            )
        },
    ));
    checks
}

/// What orch recorded as refused by the OS in the run, for the details.
fn os_refusals(run: &OrchRun) -> String {
    let events = run.events();
    let n = events
        .iter()
        .filter(|e| {
            e["kind"] == "permission_denied"
                && e["data"]["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("refused by the operating system"))
        })
        .count();
    format!("{n} tool results recorded as refused by the OS")
}

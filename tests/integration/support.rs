//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository root (where Cargo.toml is).
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A command running the built `orch` binary from the repository root,
/// with no colour, a fixed width, and no user or project settings leaking in.
pub(crate) fn orch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_orch"));
    c.current_dir(root())
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", root().join("tests/fixtures/no-config"))
        .env_remove("ORCH_STATE_DIR")
        .env_remove("ORCH_MAX_PARALLEL")
        // Tests that want GitHub's reports set these themselves.
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT");
    c
}

/// Run `orch` with these arguments.
pub(crate) fn run(args: &[&str]) -> Output {
    orch().args(args).output().expect("orch runs")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr with miette's wrapping undone: the frame characters dropped and
/// every run of white space one space, so a test can look for a phrase
/// that was wrapped.
pub(crate) fn flat_stderr(o: &Output) -> String {
    stderr(o)
        .replace(['│', '×', '╭', '╰', '─', '·'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout as JSON; fails the test, showing both streams, when it is not.
#[track_caller]
pub(crate) fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            stdout(o),
            stderr(o)
        )
    })
}

/// Wait at most `limit` for `child` (`what` says which command it is),
/// reading its piped stdout and stderr meanwhile (those not taken already);
/// on the deadline, kill it and fail the test.
#[track_caller]
pub(crate) fn finish_within(mut child: Child, limit: Duration, what: &str) -> Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Write `text` to `dir/name` (folders made as needed); the path written.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// The example pipelines, `pipelines/*.toml` relative to the root, sorted;
/// fails the test when there are none.
pub(crate) fn example_pipelines() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("pipelines"))
        .expect("pipelines/ is readable")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| format!("pipelines/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no pipelines/*.toml");
    v
}

/// Run `orch` from `dir` (for settings tests).
pub(crate) fn run_in(dir: &Path, args: &[&str]) -> Output {
    orch()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("orch runs")
}

/// What some tests need beyond the Rust toolchain, Python 3 and Node:
/// pinned packages that `scripts/test` installs into `.cache/<name>` (or
/// that an `ORCH_*_DIR` variable points to). Plain `cargo test` skips a
/// test whose tool is missing (see [`require!`]); `scripts/test` sets
/// `ORCH_TEST_REQUIRE_ALL=1`, under which a missing tool fails the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    /// The five agent CLIs (npm), by `scripts/install-agent-clis.sh`.
    AgentClis,
    /// The MCP Python SDK and the MCP Inspector CLI, by
    /// `scripts/install-mcp-clients.sh`.
    McpClients,
    /// check-jsonschema and zizmor, by `scripts/install-ci-validators.sh`.
    CiValidators,
}

/// The variable that turns a skip into a failure.
pub(crate) const REQUIRE_ALL: &str = "ORCH_TEST_REQUIRE_ALL";

impl Tool {
    /// What it is, for the reason a test does not run.
    fn what(self) -> &'static str {
        match self {
            Tool::AgentClis => "the agent CLIs",
            Tool::McpClients => "the MCP clients",
            Tool::CiValidators => "the CI validators",
        }
    }

    /// The variable naming its directory, else `.cache/<cache>`.
    fn var(self) -> &'static str {
        match self {
            Tool::AgentClis => "ORCH_AGENT_CLIS_DIR",
            Tool::McpClients => "ORCH_MCP_CLIENTS_DIR",
            Tool::CiValidators => "ORCH_CI_VALIDATORS_DIR",
        }
    }

    fn cache(self) -> &'static str {
        match self {
            Tool::AgentClis => "agent-clis",
            Tool::McpClients => "mcp-clients",
            Tool::CiValidators => "ci-validators",
        }
    }

    /// The files (relative to its directory) the tests run.
    fn files(self) -> &'static [&'static str] {
        match self {
            Tool::AgentClis => &[
                "node_modules/.bin/claude",
                "node_modules/.bin/codex",
                "node_modules/.bin/gemini",
                "node_modules/.bin/opencode",
                "node_modules/.bin/copilot",
            ],
            Tool::McpClients => &["venv/bin/python", "node_modules/.bin/mcp-inspector"],
            Tool::CiValidators => &["venv/bin/check-jsonschema", "venv/bin/zizmor"],
        }
    }

    /// Where it is or would be installed.
    pub(crate) fn dir(self) -> PathBuf {
        std::env::var_os(self.var())
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join(".cache").join(self.cache()))
    }

    /// Why it cannot be used, on one line; `None` when it is installed.
    pub(crate) fn missing(self) -> Option<String> {
        let dir = self.dir();
        let absent: Vec<&str> = self
            .files()
            .iter()
            .copied()
            .filter(|f| !dir.join(f).exists())
            .collect();
        if absent.is_empty() {
            return None;
        }
        let state = if absent.len() == self.files().len() {
            "not installed".to_string()
        } else {
            format!("incomplete (no {})", absent.join(", "))
        };
        Some(format!(
            "{} are {state} in {}: scripts/test installs them \
             (scripts/install-{}.sh), or set {} to where they are",
            self.what(),
            dir.display(),
            self.cache(),
            self.var()
        ))
    }

    /// Its directory, for a helper of a test that started with
    /// [`require!`]; fails the test when it is missing (a test that reaches
    /// here without `require!` fails instead of skipping).
    #[track_caller]
    pub(crate) fn installed_dir(self) -> PathBuf {
        if let Some(why) = self.missing() {
            panic!("{why} (the test should start with require!(Tool::{self:?}))");
        }
        self.dir()
    }
}

/// The tool's directory when it is installed. When it is not: under
/// `ORCH_TEST_REQUIRE_ALL` (set by `scripts/test`) the test fails with the
/// reason; otherwise one line `skipped: <test>: <reason>` goes to stderr
/// (past the harness's capture, so plain `cargo test` shows it) and the
/// result is `None`. Tests call it through [`require!`].
#[track_caller]
pub(crate) fn installed(tool: Tool) -> Option<PathBuf> {
    let Some(why) = tool.missing() else {
        return Some(tool.dir());
    };
    if std::env::var_os(REQUIRE_ALL).is_some_and(|v| !v.is_empty() && v != "0") {
        panic!("{why} ({REQUIRE_ALL} is set: nothing may be skipped)");
    }
    skipped(&why);
    None
}

/// Says `skipped: <test>: <why>` on stderr, past the harness's capture,
/// for a test that returns early because the machine lacks a feature
/// (cgroups a process may make, say) rather than a tool.
pub(crate) fn skipped(why: &str) {
    // The harness runs each test on a thread named after it.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // Straight to the file descriptor: eprintln! is captured by the
    // harness and shown only for a failing test.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: {why}");
}

/// The first line of a test that needs a [`Tool`]: evaluates to the
/// tool's directory, or returns from the test (skipped, or failed under
/// `ORCH_TEST_REQUIRE_ALL`) when the tool is not installed.
///
/// ```ignore
/// let dir = require!(Tool::CiValidators);
/// ```
macro_rules! require {
    ($tool:expr) => {
        match $crate::support::installed($tool) {
            Some(dir) => dir,
            None => return,
        }
    };
}
pub(crate) use require;

/// Where the pinned agent CLIs are (a test using them starts with
/// `require!(Tool::AgentClis)`).
pub(crate) fn clis_dir() -> PathBuf {
    Tool::AgentClis.installed_dir()
}

/// The pinned CLIs' executables (`node_modules/.bin` of [`clis_dir`]).
pub(crate) fn clis_bin() -> PathBuf {
    clis_dir().join("node_modules/.bin")
}

/// `orch doctor ARGS` with the pinned CLIs first on `PATH`, run outside
/// the repository, where the CLIs are installed (doctor runs no program
/// from the folder it runs in or its repository).
pub(crate) fn doctor_elsewhere(args: &[&str]) -> std::process::Output {
    let elsewhere = tempfile::tempdir().unwrap();
    orch()
        .current_dir(elsewhere.path())
        .env("PATH", path_with_clis())
        .env("COPILOT_CACHE_HOME", clis_dir().join("copilot-cache"))
        .env("ORCH_STATE_DIR", elsewhere.path())
        .arg("doctor")
        .args(args)
        .output()
        .unwrap()
}

/// PATH with the pinned CLIs first.
pub(crate) fn path_with_clis() -> String {
    format!(
        "{}:{}",
        clis_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Whether this machine lets a process make cgroups (v2) in its own: a
/// folder made and removed in the test's own cgroup.
pub(crate) fn cgroups_here() -> bool {
    let Some(own) = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        })
    else {
        return false;
    };
    let Some(mount) = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.contains(" - cgroup2 "))
                .and_then(|l| l.split(' ').nth(4).map(str::to_string))
        })
    else {
        return false;
    };
    let probe = Path::new(&mount)
        .join(own.trim_start_matches('/'))
        .join(format!("orch-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
}

/// A temporary folder with `work`, `home` and `cache` made in it: the
/// folder (removed when dropped), its canonical path and the three.
pub(crate) fn rooms() -> (tempfile::TempDir, PathBuf, [PathBuf; 3]) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let rooms = ["work", "home", "cache"].map(|d| root.join(d));
    for d in &rooms {
        std::fs::create_dir_all(d).unwrap();
    }
    (dir, root, rooms)
}

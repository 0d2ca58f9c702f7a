//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (where Cargo.toml is).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A command running the built `orch` binary from the repository root,
/// with no colour, a fixed width, and no user or project settings leaking in.
pub fn orch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_orch"));
    c.current_dir(root())
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env("XDG_CONFIG_HOME", root().join("tests/fixtures/no-config"))
        .env_remove("ORCH_STATE_DIR")
        .env_remove("ORCH_MAX_PARALLEL");
    c
}

/// Run `orch` with these arguments.
pub fn run(args: &[&str]) -> Output {
    orch().args(args).output().expect("orch runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Run `orch` from `dir` (for settings tests).
pub fn run_in(dir: &Path, args: &[&str]) -> Output {
    orch()
        .current_dir(dir)
        .args(args)
        .output()
        .expect("orch runs")
}

/// Where the pinned agent CLIs are: `ORCH_AGENT_CLIS_DIR` or
/// `.cache/agent-clis` (installed by `scripts/install-agent-clis.sh`, which
/// `scripts/test` runs). Missing CLIs fail the test that needs them.
pub fn clis_dir() -> PathBuf {
    let dir = std::env::var_os("ORCH_AGENT_CLIS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/agent-clis"));
    assert!(
        dir.join("node_modules/.bin/claude").exists(),
        "the agent CLIs are not installed in {}: run scripts/install-agent-clis.sh (scripts/test does)",
        dir.display()
    );
    dir
}

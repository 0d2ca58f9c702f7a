//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

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
        .env_remove("ORCH_MAX_PARALLEL")
        // Tests that want GitHub's reports set these themselves.
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("GITHUB_OUTPUT");
    c
}

/// Run `orch` with these arguments.
pub fn run(args: &[&str]) -> Output {
    orch().args(args).output().expect("orch runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr with miette's wrapping undone: the frame characters dropped and
/// every run of white space one space, so a test can look for a phrase
/// that was wrapped.
pub fn flat_stderr(o: &Output) -> String {
    stderr(o)
        .replace(['│', '×', '╭', '╰', '─', '·'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// stdout as JSON; fails the test, showing both streams, when it is not.
#[track_caller]
pub fn json_of(o: &Output) -> Value {
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
pub fn finish_within(mut child: Child, limit: Duration, what: &str) -> Output {
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
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// The example pipelines, `pipelines/*.toml` relative to the root, sorted;
/// fails the test when there are none.
pub fn example_pipelines() -> Vec<String> {
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

/// The pinned CLIs' executables (`node_modules/.bin` of [`clis_dir`]).
pub fn clis_bin() -> PathBuf {
    clis_dir().join("node_modules/.bin")
}

/// PATH with the pinned CLIs first.
pub fn path_with_clis() -> String {
    format!(
        "{}:{}",
        clis_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

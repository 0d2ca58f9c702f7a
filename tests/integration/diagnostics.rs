//! Every class of pipeline error, one fixture each: `orch validate` must
//! exit 2, report exactly the expected diagnostics at the expected places
//! (`--format json`), and render them as in the reviewed snapshots
//! (`snapshots/integration__diagnostics__<fixture>.snap`).
//!
//! Validation runs as on a machine where orch cannot confine agents
//! (`ORCH_CONFINEMENT=off`): the strictest case, and the same on every
//! machine. What confinement changes is in `confinement.rs`.
//!
//! The fixtures are `tests/fixtures/invalid/<class>.toml`, named after the
//! code `orch::pipeline::<class>`; each starts with a comment saying what is
//! wrong. To add one: write the file, add a line to the `fixtures!` table
//! below, run `INSTA_UPDATE=always cargo test --test integration diagnostics`
//! and read the new `.snap` file before committing it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;

/// `orch` with these arguments, confinement off.
fn run(args: &[&str]) -> std::process::Output {
    run_in(None, args)
}

/// [`run`] in `dir` (the crate root when `None`).
fn run_in(dir: Option<&Path>, args: &[&str]) -> std::process::Output {
    let mut cmd = support::orch();
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd.env("ORCH_CONFINEMENT", "off")
        .args(args)
        .output()
        .expect("orch runs")
}

/// The workspace a fixture is validated in, when it needs one of its own
/// (a `.mcp.json`): `tests/fixtures/invalid/workspaces/<name>/`.
fn workspace(name: &str) -> Option<PathBuf> {
    let d = support::root().join(FIXTURES).join("workspaces").join(name);
    d.is_dir().then_some(d)
}

const FIXTURES: &str = "tests/fixtures/invalid";

/// One diagnostic a fixture must produce.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    /// The code without its `orch::pipeline::` prefix.
    code: &'static str,
    /// 1-based line and column (in characters) of the start of the span.
    line: u64,
    column: u64,
    /// The file the diagnostic points into, when it is not the fixture.
    file: Option<&'static str>,
}

/// A diagnostic in the fixture itself.
const fn at(code: &'static str, line: u64, column: u64) -> Expected {
    Expected {
        code,
        line,
        column,
        file: None,
    }
}

/// A diagnostic in another file (a profile the fixture names).
const fn in_file(file: &'static str, code: &'static str, line: u64, column: u64) -> Expected {
    Expected {
        code,
        line,
        column,
        file: Some(file),
    }
}

/// `fixture => [every diagnostic it produces, in output order]`. Generates
/// the table `EXPECTATIONS` and one test per fixture in `mod fixture`.
macro_rules! fixtures {
    ($($name:ident => [$($expected:expr),+ $(,)?]),+ $(,)?) => {
        const EXPECTATIONS: &[(&str, &[Expected])] = &[$((stringify!($name), &[$($expected),+])),+];

        mod fixture {
            $(
                #[test]
                fn $name() {
                    super::check(stringify!($name));
                }
            )+
        }
    };
}

fixtures! {
    syntax => [at("syntax", 3, 15)],
    unknown_key => [at("unknown_key", 13, 1)],
    wrong_type => [at("wrong_type", 7, 10)],
    missing_key => [at("missing_key", 5, 1)],
    version => [at("version", 2, 11)],
    bad_name => [at("bad_name", 3, 8)],
    empty => [at("empty", 7, 10)],
    duplicate_phase => [at("duplicate_phase", 11, 8)],
    duplicate_phase_tools => [at("duplicate_phase", 17, 8)],
    duplicate_agent => [at("duplicate_agent", 7, 30)],
    unknown_agent => [at("unknown_agent", 7, 11)],
    unknown_value => [at("unknown_value", 11, 14)],
    missing_kind => [at("missing_kind", 5, 9)],
    missing_command => [at("missing_command", 5, 9)],
    command_on_agent => [at("command_on_agent", 6, 11)],
    binary_on_command => [at("binary_on_command", 7, 10)],
    prompt_conflict => [at("prompt_conflict", 9, 15)],
    missing_prompt => [at("missing_prompt", 7, 11)],
    prompt_file => [at("prompt_file", 8, 15)],
    profile_missing => [at("profile_missing", 9, 11)],
    unknown_dependency => [at("unknown_dependency", 13, 15)],
    self_dependency => [at("self_dependency", 8, 15)],
    unwritable_artifact => [at("unwritable_artifact", 7, 8)],
    cycle => [at("cycle", 8, 15)],
    agent_tools_key => [at("agent_tools_key", 9, 21)],
    unknown_tool => [at("unknown_tool", 11, 13)],
    mcp_name => [at("mcp_name", 14, 8)],
    unknown_mcp_server => [at("unknown_mcp_server", 14, 8)],
    unknown_orch_tool => [at("unknown_orch_tool", 11, 8)],
    mcp_server => [at("mcp_server", 7, 7)],
    template => [at("template", 9, 20)],
    contract => [at("contract", 11, 14)],
    mcp_json => [in_file("./.mcp.json", "mcp_json", 2, 38)],
    mcp_json_entry => [at("mcp_json_entry", 11, 8)],
    too_small => [at("too_small", 10, 13)],
    too_large => [at("too_large", 9, 11)],
    duration => [at("duration", 9, 11)],
    read_only_writes => [at("read_only_writes", 11, 12)],
    controlled_flag => [at("controlled_flag", 6, 30)],
    controlled_env => [at("controlled_env", 6, 46)],
    profile_front_matter => [in_file(
        "tests/fixtures/invalid/profiles/broken-front-matter.md",
        "profile_front_matter",
        2,
        70,
    )],
    not_utf8 => [at("not_utf8", 4, 19)],
    unenforceable => [at("unenforceable", 12, 14)],
    unsupported_tool => [at("unsupported_tool", 11, 12)],
    judge_runs_the_work => [at("judge_runs_the_work", 8, 12)],
    judge_after_a_full_access_writer => [at("judge_runs_the_work", 8, 12)],
    judge_loads_plugins_at_workspace_write => [at("judge_runs_the_work", 14, 12)],
    bad_model => [at("bad_model", 6, 9)],
    many_errors => [
        at("version", 2, 11),
        at("bad_name", 3, 8),
        at("unknown_value", 6, 8),
        at("duration", 7, 11),
        at("unknown_agent", 11, 11),
        // `test` and `review` run in the default mode `fix` (the given mode
        // is invalid), whose unrestricted Bash strict refuses for claude.
        at("unenforceable", 16, 11),
        at("unknown_key", 17, 1),
        at("unknown_tool", 20, 13),
        at("too_small", 21, 13),
        at("unenforceable", 25, 11),
        at("unknown_dependency", 26, 15),
    ],
}

fn fixture_path(name: &str) -> String {
    format!("{FIXTURES}/{name}.toml")
}

fn expectations(name: &str) -> &'static [Expected] {
    EXPECTATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, e)| *e)
        .unwrap_or_else(|| panic!("no expectations for fixture `{name}`"))
}

fn json(dir: Option<&Path>, args: &[&str]) -> (std::process::Output, Value) {
    let out = run_in(dir, args);
    let value = support::json_of(&out);
    (out, value)
}

/// Everything one fixture must satisfy.
fn check(name: &str) {
    let dir = workspace(name);
    let path = match dir {
        Some(_) => format!("../../{name}.toml"),
        None => fixture_path(name),
    };
    let dir = dir.as_deref();
    let expected = expectations(name);

    // Text output: exit 2, diagnostics on stderr, nothing on stdout.
    let out = run_in(dir, &["validate", "--color", "never", &path]);
    let text = support::stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "`orch validate {path}`:\n{text}"
    );
    assert_eq!(support::stdout(&out), "", "`orch validate {path}` stdout");

    // JSON output: the same exit code and exactly the expected diagnostics.
    let (out, report) = json(dir, &["validate", "--format", "json", &path]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "`orch validate --format json {path}`"
    );
    assert_eq!(report["valid"], false, "{report:#}");
    assert_eq!(report["files"][0]["file"], path.as_str(), "{report:#}");
    assert_eq!(report["files"][0]["valid"], false, "{report:#}");
    assert_eq!(report["files"][0]["errors"], expected.len(), "{report:#}");
    let diags = report["diagnostics"].as_array().expect("diagnostics array");
    let found: Vec<(String, u64, u64, String)> = diags
        .iter()
        .map(|d| {
            (
                d["code"].as_str().unwrap_or_default().to_string(),
                d["line"].as_u64().unwrap_or_default(),
                d["column"].as_u64().unwrap_or_default(),
                d["file"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, u64, u64, String)> = expected
        .iter()
        .map(|e| {
            (
                format!("orch::pipeline::{}", e.code),
                e.line,
                e.column,
                e.file.map_or_else(|| path.clone(), str::to_string),
            )
        })
        .collect();
    assert_eq!(found, want, "diagnostics of {path}:\n{report:#}");
    for d in diags {
        assert_eq!(d["severity"], "error", "{d:#}");
        let message = d["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "empty message: {d:#}");
        // The contract: every error comes with a one-line help.
        let help = d["help"].as_str().unwrap_or_default();
        assert!(
            !help.is_empty() && !help.contains('\n'),
            "every error needs a one-line help: {d:#}"
        );
        let start = (d["line"].as_u64(), d["column"].as_u64());
        let end = (d["end_line"].as_u64(), d["end_column"].as_u64());
        assert!(end >= start, "span ends before it starts: {d:#}");
    }

    // The rendered text, as reviewed.
    insta::with_settings!({
        description => format!("orch validate --color never {path}"),
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

/// The fixture files: `*.toml` directly in the fixture directory.
fn fixture_files() -> Vec<PathBuf> {
    let dir = support::root().join(FIXTURES);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .filter(|p| {
            // `.gitattributes` and the like are not fixtures.
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn every_fixture_has_expectations_and_every_expectation_a_fixture() {
    let files = fixture_files();
    for f in &files {
        assert_eq!(
            f.extension().and_then(|e| e.to_str()),
            Some("toml"),
            "{} is not a `.toml` fixture (profiles go under profiles/)",
            f.display()
        );
        let name = stem(f);
        assert!(
            EXPECTATIONS.iter().any(|(n, _)| *n == name),
            "fixture {} has no line in the `fixtures!` table of {}",
            f.display(),
            file!()
        );
        // Raw bytes: one fixture is deliberately not UTF-8.
        let bytes = std::fs::read(f).expect("fixture is readable");
        assert!(
            bytes.starts_with(b"# "),
            "fixture {} must start with a comment saying what is wrong",
            f.display()
        );
    }
    let names: BTreeSet<String> = files.iter().map(|f| stem(f)).collect();
    for (name, _) in EXPECTATIONS {
        assert!(
            names.contains(*name),
            "the `fixtures!` table names `{name}`, but {} does not exist",
            fixture_path(name)
        );
    }
}

/// Every code the validator can emit has a fixture named after it (except
/// `unreadable`, which is about a file that is not there; see below).
#[test]
fn every_error_class_has_a_fixture() {
    let source = std::fs::read_to_string(support::root().join("src/pipeline/diagnostic.rs"))
        .expect("diagnostic.rs is readable");
    let codes: BTreeSet<&str> = source
        .split("\"orch::pipeline::")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert!(codes.len() > 30, "found too few codes: {codes:?}");
    let missing: Vec<&&str> = codes
        .iter()
        .filter(|c| **c != "unreadable")
        .filter(|c| !EXPECTATIONS.iter().any(|(n, _)| n == *c))
        .collect();
    assert!(
        missing.is_empty(),
        "error classes without a fixture in {FIXTURES}: {missing:?}"
    );
}

/// `many_errors.toml` holds several different errors; all are reported in
/// one run, not just the first.
#[test]
fn all_errors_in_a_file_are_reported_together() {
    let classes: BTreeSet<&str> = expectations("many_errors").iter().map(|e| e.code).collect();
    assert!(classes.len() >= 5, "many_errors.toml should mix 5+ classes");
    let out = run(&["validate", "--color", "never", &fixture_path("many_errors")]);
    let text = support::stderr(&out);
    for class in classes {
        assert!(
            text.contains(&format!("orch::pipeline::{class}")),
            "`{class}` missing from:\n{text}"
        );
    }
    assert!(
        text.contains("many_errors.toml`: 11 errors"),
        "summary line missing:\n{text}"
    );
}

/// Several files in one run: each is reported, and the run fails.
#[test]
fn every_file_of_a_run_is_reported() {
    let paths: Vec<String> = ["version", "cycle", "many_errors"]
        .iter()
        .map(|n| fixture_path(n))
        .collect();
    let mut args = vec!["validate", "--format", "json"];
    args.extend(paths.iter().map(String::as_str));
    let (out, report) = json(None, &args);
    assert_eq!(out.status.code(), Some(2));
    let files: Vec<&str> = report["files"]
        .as_array()
        .expect("files array")
        .iter()
        .map(|f| f["file"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(files, paths.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(report["diagnostics"].as_array().map(Vec::len), Some(13));
}

#[test]
fn a_missing_file_is_unreadable() {
    let path = format!("{FIXTURES}/does-not-exist.toml");
    let (out, report) = json(None, &["validate", "--format", "json", &path]);
    assert_eq!(out.status.code(), Some(2));
    let d = &report["diagnostics"][0];
    assert_eq!(d["code"], "orch::pipeline::unreadable", "{report:#}");
    assert_eq!(d["file"], path.as_str(), "{report:#}");
    assert_eq!(
        d["message"],
        format!("could not read `{path}`: no such file"),
        "{report:#}"
    );
    let out = run(&["validate", "--color", "never", &path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(support::stderr(&out).contains("no such file"));
}

/// The example pipelines are valid, alone and together, where orch can
/// confine agents (this machine; `confinement.rs` shows them without).
#[test]
fn example_pipelines_are_valid() {
    let examples = support::example_pipelines();
    for path in &examples {
        let out = support::run(&["validate", path]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "`orch validate {path}`:\n{}",
            support::stderr(&out)
        );
        if path.ends_with("research-audit.toml") {
            // The format's own example asks codex for a tool list it cannot
            // enforce; the file says best-effort, so this is a warning.
            let err = support::stderr(&out);
            assert!(
                err.contains("⚠ `internal` is not enforced for agent `codex` (codex)"),
                "{err}"
            );
            assert_eq!(err.matches("orch::pipeline::").count(), 1, "{err}");
        } else {
            assert_eq!(support::stderr(&out), "", "`orch validate {path}` warned");
        }
        assert!(
            support::stdout(&out).starts_with(&format!("ok: `{path}`")),
            "{}",
            support::stdout(&out)
        );
    }
    let mut args = vec!["validate", "--format", "json"];
    args.extend(examples.iter().map(String::as_str));
    let out = support::run(&args);
    let report = support::json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["valid"], true, "{report:#}");
    let diags = report["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{report:#}");
    assert_eq!(diags[0]["severity"], "warning");
    assert_eq!(diags[0]["code"], "orch::pipeline::unenforceable");
}

//! What orch prints of what agents produced: an agent's output, its
//! stderr and the failure reason quoted from it reach the terminal, the
//! CI log and the reports with nothing a terminal, a log viewer or a
//! Markdown or XML reader would act on.

use std::path::Path;
use std::process::Output;

use std::process::Command;

use crate::support::{orch, stderr, stdout, write};

/// What a terminal acts on: an OSC 52 clipboard write, a title set and a
/// title report (which types the title back into the shell), a screen
/// clear, a C1 CSI, a bidi override and isolate, a line separator, DEL,
/// NUL, and a carriage return that would overwrite the line.
const TERMINAL: &str = "\\x1b]52;c;b3JjaA==\\x07\\x1b]0;pwned\\x07\\x1b[21t\\x1b[2J\\u009b31m\\u202eevil\\u2066x\\u2069\\u2028\\x7f\\x00\\rFAKE";

/// A command agent that prints [`TERMINAL`] and lines that pass for
/// workflow commands, Markdown, HTML and orch's own progress on stdout,
/// then the same as its last stderr line (which the failure's reason
/// quotes), and fails.
fn hostile(dir: &Path) -> std::path::PathBuf {
    write(
        dir,
        "hostile.py",
        &format!(
            "import sys\n\
             T = \"{TERMINAL}\"\n\
             print('::error::from stdout')\n\
             print('##[add-mask]secret ::add-mask::secret ' + T)\n\
             print('[12:00:00.000]   p/a: attempt 1 succeeded in 0.01s (1 turns)')\n\
             print('| broken | table | <img src=x onerror=alert(1)> [link](https://evil.example) ![i](https://evil.example/i.png) ```')\n\
             print('```')\n\
             print('</details><script>alert(1)</script> \\ufffe\\uffff not XML')\n\
             sys.stderr.write('::stop-commands::t\\n')\n\
             sys.stderr.write('said ' + T + ' ::error::x\\r::add-mask::secret ##[error]y <b>b</b> [l](https://evil.example) | cell \\uffff\\n')\n\
             sys.exit(1)\n"
        ),
    );
    write(
        dir,
        "p.toml",
        "version = 1\nname = \"p\"\n[agents.a]\nkind = \"command\"\ncommand = [\"python3\", \"hostile.py\"]\n\
         [[phases]]\nname = \"p\"\nagents = [\"a\"]\n",
    )
}

/// The characters nothing orch prints for people may hold: control
/// characters but newline, bidi controls, line and paragraph separators.
fn acted_on(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
        })
        .collect()
}

fn in_dir(dir: &Path, args: &[&str]) -> Output {
    orch()
        .current_dir(dir)
        .args(["--state-dir", ".state"])
        .args(args)
        .env_remove("CI")
        .output()
        .unwrap()
}

/// `orch run`'s progress and summary, `runs show`, `runs events` and
/// `runs list` as text: the agent's bytes are there, escaped.
#[test]
fn agent_bytes_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    hostile(d);
    let run = in_dir(d, &["run", "p.toml"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let shown = [
        ("run", stderr(&run) + &stdout(&run)),
        ("show", stdout(&in_dir(d, &["runs", "show", "latest"]))),
        ("events", stdout(&in_dir(d, &["runs", "events", "latest"]))),
        ("list", stdout(&in_dir(d, &["runs", "list"]))),
    ];
    for (what, text) in &shown {
        assert_eq!(acted_on(text), Vec::<char>::new(), "{what}: {text:?}");
    }
    // Shown, not dropped: the reason with its escapes, on one line.
    let reason = "exited with status 1; its last stderr line: said \\x1b]52;c;b3JjaA==\\x07\\x1b]0;pwned\\x07";
    for (what, text) in &shown[..2] {
        assert!(text.contains(reason), "{what}: {text}");
        assert!(
            text.contains("\\u{202e}evil\\u{2066}x\\u{2069}\\u{2028}\\x7f\\x00\\rFAKE"),
            "{what}: {text}"
        );
    }
    // The agent's own progress-like line is an event's text, never a line
    // of its own.
    let events = &shown[2].1;
    assert!(
        events
            .lines()
            .any(|l| l
                .ends_with("raw  [12:00:00.000]   p/a: attempt 1 succeeded in 0.01s (1 turns)")),
        "{events}"
    );
    assert!(
        !events.lines().any(|l| l.starts_with("[12:00:00.000]")),
        "{events}"
    );
}

/// `orch run --junit`: the report reads as XML (Python's parser), with the
/// agent's bytes there as escapes, U+FFFE and U+FFFF among them, which no
/// XML reader accepts.
#[test]
fn the_junit_report_reads_as_xml_with_agent_bytes_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    hostile(d);
    let run = in_dir(d, &["run", "p.toml", "--junit", "j.xml"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let read = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, json, xml.etree.ElementTree as E\n\
             out = []\n\
             for c in E.parse(sys.argv[1]).getroot().iter('testcase'):\n\
             \x20 f = c.find('failure')\n\
             \x20 s = c.find('system-out')\n\
             \x20 out.append([c.get('name'), f.get('message') if f is not None else None, f.text if f is not None else None, s.text if s is not None else None])\n\
             print(json.dumps(out))",
        )
        .arg(d.join("j.xml"))
        .output()
        .unwrap();
    let xml = std::fs::read_to_string(d.join("j.xml")).unwrap_or_default();
    assert!(read.status.success(), "{}\n{xml}", stderr(&read));
    assert_eq!(acted_on(&xml), Vec::<char>::new(), "{xml:?}");
    let cases: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    let agent = cases
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c[0] == "a")
        .unwrap_or_else(|| panic!("{cases}"));
    let message = agent[1].as_str().unwrap();
    assert!(
        message.contains("its last stderr line: said \\x1b]52;c;b3JjaA==\\x07")
            && message.ends_with("| cell \\u{ffff}"),
        "{message}"
    );
    for text in [agent[2].as_str().unwrap(), agent[3].as_str().unwrap()] {
        assert!(
            text.contains("##[add-mask]secret ::add-mask::secret \\x1b]52;c;b3JjaA==\\x07")
                && text.contains("<script>alert(1)</script> \\u{fffe}\\u{ffff} not XML"),
            "{text}"
        );
    }
}

/// The workflow commands GitHub's runner reads in a step's `log`, as
/// actions/runner does it (`src/Runner.Worker/ActionCommandManager.cs`,
/// `src/Runner.Common/ActionCommand.cs`, `ProcessInvoker.cs` at
/// 258d6c857db3): lines end at LF, CR or CRLF (`StreamReader.ReadLine`);
/// `::name props::data` once leading white space is trimmed, else
/// `##[name props]data` anywhere in the line; only registered names are
/// commands; once `::stop-commands::TOKEN` is read, nothing is but the
/// token itself (`::TOKEN::`, `##[TOKEN]`), which resumes.
fn runner_commands(log: &str) -> Vec<(String, String)> {
    const REGISTERED: &[&str] = &[
        "stop-commands",
        "set-env",
        "set-output",
        "save-state",
        "add-path",
        "add-mask",
        "add-matcher",
        "remove-matcher",
        "warning",
        "error",
        "notice",
        "debug",
        "group",
        "endgroup",
        "echo",
    ];
    let parse = |line: &str, stopped: Option<&str>| -> Option<(String, String)> {
        let known = |name: &str| {
            REGISTERED.iter().any(|r| r.eq_ignore_ascii_case(name))
                || stopped.is_some_and(|t| t.eq_ignore_ascii_case(name))
        };
        let v2 = line.trim_start();
        if let Some(rest) = v2.strip_prefix("::")
            && let Some(end) = rest.find("::")
        {
            let name = rest[..end].split(' ').next().unwrap();
            if known(name) {
                return Some((name.to_string(), rest[end + 2..].to_string()));
            }
        }
        let at = line.find("##[")?;
        let rest = &line[at + 3..];
        let end = rest.find(']')?;
        let name = rest[..end].split(' ').next().unwrap();
        known(name).then(|| (name.to_string(), rest[end + 1..].to_string()))
    };
    let mut read = Vec::new();
    let mut stopped: Option<String> = None;
    for line in log.split("\r\n").flat_map(|l| l.split(['\r', '\n'])) {
        let Some((name, data)) = parse(line, stopped.as_deref()) else {
            continue;
        };
        match &stopped {
            Some(t) if name.eq_ignore_ascii_case(t) => stopped = None,
            Some(_) => continue,
            None if name.eq_ignore_ascii_case("stop-commands") => stopped = Some(data.clone()),
            None => {}
        }
        read.push((name, data));
    }
    read
}

/// Nothing but what orch means the runner to read: groups, and the
/// pauses around agent text with their fresh tokens, each resumed.
#[track_caller]
fn only_orchs_commands(what: &str, log: &str) {
    let read = runner_commands(log);
    let mut tokens = Vec::new();
    for (name, data) in &read {
        match name.as_str() {
            "group" | "endgroup" => {}
            "stop-commands" => {
                assert!(
                    data.len() == 32 && data.chars().all(|c| c.is_ascii_hexdigit()),
                    "{what}: a token orch did not make: {data}\n{log}"
                );
                assert!(!tokens.contains(data), "{what}: a token used twice");
                tokens.push(data.clone());
            }
            t if tokens.last().is_some_and(|l| l == t) && data.is_empty() => {}
            _ => panic!("{what}: the runner reads `{name}` `{data}` in\n{log}"),
        }
    }
    let resumed = read.iter().filter(|(n, _)| tokens.contains(n)).count();
    assert_eq!(resumed, tokens.len(), "{what}: left stopped\n{log}");
}

/// Inside GitHub Actions, orch's log (the progress of `orch run`, what
/// `runs show`, `runs events` and `runs list` print, JSON included) holds
/// no workflow command an agent wrote: not at a line's start, not `##[`
/// within one, not after a CR. The Markdown summary written into a file is
/// the summary alone.
#[test]
fn in_a_github_log_agent_text_starts_no_workflow_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    hostile(d);
    // The model of the runner reads what it should (so that the check
    // below can fail).
    let planted = "x\n  ::add-mask::secret\n[t] a: ##[error]y\r::error::z\n::stop-commands::t\n::error::hidden\n::t::\n";
    let names: Vec<String> = runner_commands(planted).into_iter().map(|c| c.0).collect();
    assert_eq!(names, ["add-mask", "error", "error", "stop-commands", "t"]);

    let github = |args: &[&str]| -> Output {
        orch()
            .current_dir(d)
            .args(["--state-dir", ".state"])
            .args(args)
            .env("GITHUB_ACTIONS", "true")
            .output()
            .unwrap()
    };
    let run = github(&["run", "p.toml"]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    let log = stderr(&run);
    only_orchs_commands("run", &(log.clone() + &stdout(&run)));
    // The reason is there, as text, inside the phase's group.
    assert!(
        log.contains("::error::x\\r::add-mask::secret ##[error]y"),
        "{log}"
    );
    for args in [
        &["runs", "show", "latest"][..],
        &["runs", "show", "latest", "--markdown"],
        &["runs", "show", "latest", "--format", "json"],
        &["runs", "events", "latest"],
        &["runs", "events", "latest", "--format", "json"],
        &["runs", "events", "latest", "--follow", "--format", "json"],
        &["runs", "list"],
    ] {
        let out = github(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        only_orchs_commands(&args.join(" "), &(text.clone() + &stderr(&out)));
        if args.contains(&"json") {
            // The same JSON as outside GitHub Actions.
            let plain = orch()
                .current_dir(d)
                .args(["--state-dir", ".state"])
                .args(args)
                .output()
                .unwrap();
            let parse = |s: &str| -> Vec<serde_json::Value> {
                serde_json::Deserializer::from_str(s)
                    .into_iter()
                    .map(Result::unwrap)
                    .collect()
            };
            assert_eq!(parse(&text), parse(&stdout(&plain)), "{args:?}");
        }
    }
    // Into the step summary (a file): the summary alone.
    let summary = std::fs::File::create(d.join("summary.md")).unwrap();
    let out = orch()
        .current_dir(d)
        .args([
            "--state-dir",
            ".state",
            "runs",
            "show",
            "latest",
            "--markdown",
        ])
        .env("GITHUB_ACTIONS", "true")
        .stdout(summary)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(md.starts_with("### orch: p ❌ failed\n"), "{md}");
    assert!(
        !md.lines()
            .any(|l| l.starts_with("::stop-commands::") && l.len() == 17 + 32),
        "{md}"
    );
}

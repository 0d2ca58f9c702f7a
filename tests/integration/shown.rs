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

//! Bad input never crashes, hangs or overflows: mutated valid pipelines
//! (property test, in process) and hostile whole files (through the binary,
//! each with a deadline).

use std::process::Stdio;
use std::time::Duration;

use proptest::prelude::*;

use crate::support::{finish_within, orch, root, run, stderr};

/// Valid pipelines to mutate.
fn seeds() -> Vec<String> {
    ["demo.toml", "research-audit.toml", "audit-then-fix.toml"]
        .iter()
        .map(|f| std::fs::read_to_string(root().join("pipelines").join(f)).unwrap())
        .collect()
}

/// Fragments that tend to break TOML or pipeline structure in interesting ways.
const SNIPPETS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    "'''",
    "\"\"\"",
    ",",
    ".",
    "\n",
    "#",
    "\\u00e9",
    "[[phases]]\n",
    "[phases.tools]\n",
    "[phases.agent_tools.x]\n",
    "[agents.x]\n",
    "depends_on = [\"research\"]\n",
    "depends_on = [\"audit\"]\n",
    "name = \"research\"\n",
    "agents = []\n",
    "permission = \"read-only\"\n",
    "internal = [\"Write\", \"Bash\"]\n",
    "max_turns = 0\n",
    "max_turns = 99999999999999999999\n",
    "version = 2\n",
    "timeout = \"x\"\n",
    "mcp = [\"mcp__nope__x\"]\n",
    "prompt_file = \"../../../../etc/passwd\"\n",
    "profile = \"auditor\"\n",
    "kind = \"command\"\n",
    "flags = [\"--allowedTools\"]\n",
    "é",
    "🦀",
    "\u{0}",
    "\t",
    "\r\n",
    "1979-05-27T07:32:00Z",
    "inf",
    "nan",
    "-0",
    "0x10",
];

#[derive(Debug, Clone)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, snippet: usize },
    DuplicateLine { line: usize },
    SwapLines { a: usize, b: usize },
    DropLine { line: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), any::<usize>()).prop_map(|(at, snippet)| Edit::Insert { at, snippet }),
        any::<usize>().prop_map(|line| Edit::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::SwapLines { a, b }),
        any::<usize>().prop_map(|line| Edit::DropLine { line }),
    ]
}

fn apply(text: &str, e: &Edit) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    match *e {
        Edit::Delete { at, len } => {
            let at = at % chars.len().max(1);
            let end = (at + len).min(chars.len());
            chars[..at].iter().chain(&chars[end..]).collect()
        }
        Edit::Insert { at, snippet } => {
            let at = at % (chars.len() + 1);
            let s = SNIPPETS[snippet % SNIPPETS.len()];
            chars[..at]
                .iter()
                .copied()
                .chain(s.chars())
                .chain(chars[at..].iter().copied())
                .collect()
        }
        Edit::DuplicateLine { line } if !lines.is_empty() => {
            let i = line % lines.len();
            lines.insert(i, lines[i]);
            lines.concat()
        }
        Edit::SwapLines { a, b } if !lines.is_empty() => {
            let n = lines.len();
            lines.swap(a % n, b % n);
            lines.concat()
        }
        Edit::DropLine { line } if !lines.is_empty() => {
            lines.remove(line % lines.len());
            lines.concat()
        }
        _ => text.to_string(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    /// Error or success, never a crash; and every error has a position
    /// inside the file and a message.
    #[test]
    fn mutated_pipelines_never_crash(seed in 0usize..3, edits in proptest::collection::vec(edit(), 1..6)) {
        let mut text = seeds()[seed].clone();
        for e in &edits {
            text = apply(&text, e);
        }
        let len = text.len();
        let base = root().join("pipelines");
        match orch::pipeline::load_str(
            "mutated.toml",
            text,
            &base,
            &orch::agents::checks::Checks::new(&orch::confine::Availability::Available { abi: 7 }),
        ) {
            Ok(loaded) => {
                // A pipeline that loads also resolves and forms a DAG.
                let p = &loaded.pipeline;
                for (phase, agent) in p.invocations() {
                    let _ = p.resolve(phase, agent);
                }
                prop_assert!(orch::pipeline::graph::PhaseGraph::build(p).is_ok());
            }
            Err(invalid) => {
                prop_assert!(invalid.diagnostics.iter().any(|d| d.is_error()));
                for d in &invalid.diagnostics {
                    if &*d.source.name == "mutated.toml" {
                        prop_assert!(d.span.start <= len && d.span.end <= len, "span {:?} outside {len}", d.span);
                    }
                    prop_assert!(!d.to_string().is_empty());
                    let _ = d.render_plain(80);
                }
            }
        }
    }
}

/// `orch validate` of a file holding `bytes`, with a deadline: (exit code,
/// stderr). Fails the test on a crash, a signal or the deadline.
fn hostile(name: &str, bytes: Vec<u8>) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).unwrap();
    let child = orch()
        .args(["validate", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish_within(
        child,
        Duration::from_secs(120),
        &format!("orch validate {name}"),
    );
    let (code, err) = (out.status.code(), stderr(&out));
    assert!(
        matches!(code, Some(0) | Some(2)),
        "{name}: exit {code:?} (a crash or signal), stderr tail: {}",
        &err[err.len().saturating_sub(500)..]
    );
    (code, err)
}

/// A tiny deterministic generator, so the garbage is the same every run.
fn pseudo_random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

#[test]
fn binary_garbage() {
    let (code, err) = hostile("garbage.toml", pseudo_random_bytes(200_000, 0x5eed));
    assert_eq!(code, Some(2));
    assert!(err.contains("not UTF-8"), "{}", &err[..err.len().min(500)]);
}

#[test]
fn ten_megabyte_string() {
    let mut text = String::from("version = 1\nname = \"big\"\ndescription = \"");
    text.push_str(&"x".repeat(10 << 20));
    text.push_str(
        "\"\n[[phases]]\nname = \"a\"\nagents = [\"claude\"]\nmode = \"plan\"\nprompt = \"p\"\n",
    );
    assert_eq!(hostile("big.toml", text.into_bytes()).0, Some(0));
    // And unterminated, so the error has to point into it.
    let mut text = String::from("version = 1\nname = \"big\"\ndescription = \"");
    text.push_str(&"x".repeat(10 << 20));
    assert_eq!(hostile("big-open.toml", text.into_bytes()).0, Some(2));
}

#[test]
fn deep_nesting() {
    let n = 100_000;
    let cases = [
        (
            "arrays.toml",
            format!("a = {}{}", "[".repeat(n), "]".repeat(n)),
        ),
        (
            "inline.toml",
            format!("a = {}1{}", "{b = ".repeat(n), "}".repeat(n)),
        ),
        ("dotted.toml", format!("{} = 1", vec!["a"; n].join("."))),
        ("header.toml", format!("[{}]", vec!["a"; n].join("."))),
        (
            "phases-tools.toml",
            format!("[[phases]]\ntools = {}{}", "[".repeat(n), "]".repeat(n)),
        ),
    ];
    for (name, body) in cases {
        let text = format!("version = 1\nname = \"deep\"\n{body}\n");
        let (code, _) = hostile(name, text.into_bytes());
        assert_eq!(code, Some(2), "{name}");
    }
}

fn chain(n: usize, cyclic: bool) -> String {
    let mut s = String::from(
        "version = 1\nname = \"chain\"\n[agents.t]\nkind = \"command\"\ncommand = [\"true\"]\n",
    );
    for i in 0..n {
        s.push_str(&format!("[[phases]]\nname = \"p{i}\"\nagents = [\"t\"]\n"));
        if i > 0 {
            s.push_str(&format!("depends_on = [\"p{}\"]\n", i - 1));
        } else if cyclic {
            s.push_str(&format!("depends_on = [\"p{}\"]\n", n - 1));
        }
    }
    s
}

#[test]
fn hundred_thousand_phase_chain() {
    let (code, err) = hostile("chain.toml", chain(100_000, false).into_bytes());
    assert_eq!(code, Some(0), "{}", &err[..err.len().min(500)]);
    let (code, err) = hostile("cycle.toml", chain(100_000, true).into_bytes());
    assert_eq!(code, Some(2));
    assert!(
        err.contains("dependency cycle: p0 -> p99999 -> p99998"),
        "{}",
        &err[..err.len().min(500)]
    );
    assert!(err.contains("p1 -> p0"));
}

#[test]
fn many_errors_are_all_reported_but_output_stays_bounded() {
    let mut s = String::from("version = 1\nname = \"many\"\n");
    for i in 0..5_000 {
        s.push_str(&format!(
            "[[phases]]\nname = \"p{i}\"\nagents = [\"nobody{i}\"]\nprompt = \"x\"\n"
        ));
    }
    let (code, err) = hostile("many.toml", s.into_bytes());
    assert_eq!(code, Some(2));
    assert!(
        err.contains("... and 4800 more"),
        "{}",
        &err[err.len().saturating_sub(300)..]
    );
    assert!(err.contains("5000 errors"));
}

#[test]
fn empty_and_whitespace_files() {
    for (name, text) in [
        ("empty.toml", ""),
        ("blank.toml", "\n\n  \n"),
        ("comment.toml", "# nothing\n"),
    ] {
        let (code, err) = hostile(name, text.as_bytes().to_vec());
        assert_eq!(code, Some(2), "{name}");
        assert!(
            err.contains("missing required key `version`"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_directory_is_not_a_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["validate", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("it is a directory"),
        "{}",
        stderr(&out)
    );
}

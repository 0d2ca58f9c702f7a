//! The manual stays true mechanically: every TOML example in `README.md`
//! and `docs/` is checked by orch itself, and every relative link points
//! at a file (and heading) that exists inside the repository.
//!
//! Fences: ```` ```toml ```` is a whole pipeline file that `orch validate`
//! accepts; ```` ```toml invalid orch::CODE ```` is one it rejects with
//! that code; ```` ```toml settings ```` is a whole `orch.toml` that `orch
//! config` accepts. A fragment is not a TOML example: it goes in a
//! ```` ```text ```` fence.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};

use super::support::*;

/// README.md and every Markdown file under docs/.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut v = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut v);
    v.sort();
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap().display().to_string()
}

/// (info string, text, line) of each fenced code block.
fn fences(text: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String, usize)> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = text[..range.start].lines().count() + 1;
                current = Some((info.to_string(), String::new(), line));
            }
            Event::Text(t) => {
                if let Some(c) = current.as_mut() {
                    c.1.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (repeats get `-1`, `-2`, as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap());
                let mut s = base.clone();
                let mut n = 0;
                while out.contains(&s) {
                    n += 1;
                    s = format!("{base}-{n}");
                }
                out.insert(s);
            }
            _ => {}
        }
    }
    out
}

/// Each link's target and line.
fn links(text: &str) -> Vec<(String, usize)> {
    Parser::new(text)
        .into_offset_iter()
        .filter_map(|(e, range)| match e {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some((
                dest_url.to_string(),
                text[..range.start].lines().count().max(1),
            )),
            _ => None,
        })
        .collect()
}

/// Where examples are checked: an empty project with the repository's
/// example profiles and prompts (examples may name them).
fn sandbox() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for dir in ["profiles", "prompts"] {
        let Ok(entries) = std::fs::read_dir(root().join(dir)) else {
            continue;
        };
        std::fs::create_dir_all(d.path().join(dir)).unwrap();
        for e in entries {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::copy(&p, d.path().join(dir).join(p.file_name().unwrap())).unwrap();
            }
        }
    }
    d
}

#[test]
fn every_toml_example_in_the_docs_is_checked() {
    let mut checked = 0;
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (info, body, line) in fences(&text) {
            let words: Vec<&str> = info.split_whitespace().collect();
            if words.first() != Some(&"toml") {
                continue;
            }
            let at = format!("{}:{line}", rel(&page));
            let d = sandbox();
            // The state directory outside the workspace, as orch requires
            // where an agent may write the workspace.
            let state = tempfile::tempdir().unwrap();
            let state_dir = state.path().to_str().unwrap();
            let run_in =
                |args: &[&str]| run_in(d.path(), &[&["--state-dir", state_dir][..], args].concat());
            checked += 1;
            match words.get(1).copied() {
                None => {
                    write(d.path(), "pipeline.toml", &body);
                    let o = run_in(&["validate", "pipeline.toml"]);
                    if !o.status.success() {
                        problems.push(format!("{at}: not a valid pipeline:\n{}", stderr(&o)));
                    }
                }
                Some("invalid") => {
                    let Some(code) = words.get(2) else {
                        problems.push(format!("{at}: `toml invalid` names no code"));
                        continue;
                    };
                    write(d.path(), "pipeline.toml", &body);
                    let o = run_in(&["validate", "pipeline.toml", "--format", "json"]);
                    let v: serde_json::Value =
                        serde_json::from_slice(&o.stdout).unwrap_or_default();
                    let codes: Vec<String> = v["diagnostics"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|d| d["severity"] == "error")
                        .filter_map(|d| d["code"].as_str().map(str::to_string))
                        .collect();
                    if o.status.code() != Some(2) || !codes.iter().any(|c| c == code) {
                        problems.push(format!(
                            "{at}: should fail with {code}, gave exit {:?} and errors {codes:?}\n{}",
                            o.status.code(),
                            stderr(&o)
                        ));
                    }
                }
                Some("settings") => {
                    write(d.path(), "orch.toml", &body);
                    let o = run_in(&["config"]);
                    if !o.status.success() {
                        problems.push(format!("{at}: settings orch refuses:\n{}", stderr(&o)));
                    }
                }
                Some(other) => problems.push(format!(
                    "{at}: unknown fence `toml {other}` (toml, toml invalid CODE, toml settings)"
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(checked >= 10, "only {checked} TOML examples found");
}

#[test]
fn every_relative_link_resolves_inside_the_repository() {
    let repo = root().canonicalize().unwrap();
    let mut problems = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(
            !text.contains("shared/docs") && !text.contains("../shared"),
            "{}: names a folder outside the repository",
            rel(&page)
        );
        for (target, line) in links(&text) {
            let at = format!("{}:{line}", rel(&page));
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let Ok(real) = file.canonicalize() else {
                problems.push(format!("{at}: `{target}` does not exist"));
                continue;
            };
            if !real.starts_with(&repo) {
                problems.push(format!("{at}: `{target}` is outside the repository"));
                continue;
            }
            if let Some(anchor) = anchor
                && real.extension().is_some_and(|x| x == "md")
            {
                let heads = anchors(&std::fs::read_to_string(&real).unwrap());
                if !heads.contains(anchor) {
                    problems.push(format!("{at}: no heading `#{anchor}` in {}", rel(&real)));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checks above can fail: a broken example and a broken link are
/// caught (on copies, so the real pages stay as they are).
#[test]
fn the_doc_checks_catch_what_they_claim_to() {
    let page = "# T\n\n## Two words\n\n```toml\nversion = 1\n```\n\n[x](missing.md) [y](#two-words) [z](#nope)\n";
    assert_eq!(fences(page).len(), 1);
    assert_eq!(fences(page)[0].0, "toml");
    assert_eq!(fences(page)[0].2, 5);
    let targets: Vec<String> = links(page).into_iter().map(|l| l.0).collect();
    assert_eq!(targets, ["missing.md", "#two-words", "#nope"]);
    let heads = anchors(page);
    assert!(heads.contains("two-words") && !heads.contains("nope"));
    assert_eq!(slug("`orch run` — Options!"), "orch-run--options");
}

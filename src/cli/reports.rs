//! What agents reported through orch's MCP server, as text: one section
//! per kind, each line naming the phase, agent and attempt it came from,
//! shown on one line through [`text::line`] (agents wrote every word of
//! it). (`--format json` prints the stored rows as they are.)

use std::io::{self, Write};

use serde_json::Value;

use crate::clock::duration;
use crate::report::text;
use crate::store::{LearningRow, ReportKind, ReportRow};

/// The sections in the order they are shown, with their titles.
const SECTIONS: &[(ReportKind, &str)] = &[
    (ReportKind::TaskStarted, "tasks"),
    (ReportKind::Decision, "decisions"),
    (ReportKind::Blocker, "issues"),
    (ReportKind::Milestone, "milestones"),
    (ReportKind::Finding, "findings"),
    (ReportKind::Claim, "completion claims"),
    (ReportKind::Verdict, "verdicts"),
    (ReportKind::Comment, "comments"),
    (ReportKind::Followup, "follow-ups"),
    (ReportKind::TestHealth, "test health"),
];

/// Every section that has something, then the learnings.
pub(super) fn write(
    out: &mut impl Write,
    reports: &[ReportRow],
    learnings: &[LearningRow],
) -> io::Result<()> {
    for (kind, title) in SECTIONS {
        let rows: Vec<&ReportRow> = reports.iter().filter(|r| r.kind == *kind).collect();
        if rows.is_empty() {
            continue;
        }
        writeln!(out, "\n{title}")?;
        for r in rows {
            let line = match kind {
                ReportKind::TaskStarted => task(r, reports),
                _ => line(r),
            };
            writeln!(out, "  {}", text::line(&format!("{}  {line}", origin(r))))?;
        }
    }
    if !learnings.is_empty() {
        writeln!(out, "\nlearnings")?;
        for l in learnings {
            writeln!(out, "  {}", text::line(&learning(l)))?;
        }
    }
    Ok(())
}

/// One learning on a line: where from, type, quality, pattern.
pub(super) fn learning(l: &LearningRow) -> String {
    format!(
        "{}/{}/{}  [{}] (quality {}) {}",
        l.run_id, l.phase, l.agent, l.learning_type, l.quality, l.pattern
    )
}

fn origin(r: &ReportRow) -> String {
    format!("{}/{}#{}", r.phase, r.agent, r.attempt)
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or("")
}

fn list(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// A task with how it ended (its `task_completed` report, if any).
fn task(started: &ReportRow, all: &[ReportRow]) -> String {
    let d = &started.data;
    let mut text = format!("task {} `{}`: {}", started.id, s(d, "name"), s(d, "goal"));
    let done = all
        .iter()
        .rev()
        .find(|r| r.kind == ReportKind::TaskCompleted && r.task_id == Some(started.id));
    match done {
        None => text.push_str(" (not completed)"),
        Some(c) => {
            let c = &c.data;
            let took = duration(c["duration_ms"].as_u64().unwrap_or(0));
            text.push_str(&format!(
                "; {} in {took}: {}",
                s(c, "status"),
                s(&c["outcome"], "summary")
            ));
            match c["files_changed"].as_array() {
                Some(f) if f.is_empty() => text.push_str("; no files changed"),
                Some(_) => {
                    text.push_str(&format!("; files changed: {}", list(&c["files_changed"])))
                }
                None => text.push_str("; files changed unknown (not a git repository orch reads)"),
            }
        }
    }
    text
}

fn line(r: &ReportRow) -> String {
    let d = &r.data;
    let task = r
        .task_id
        .map(|t| format!(" (task {t})"))
        .unwrap_or_default();
    match r.kind {
        ReportKind::Decision => format!(
            "[{}] {} -> {}: {}{task}",
            s(d, "category"),
            s(d, "question"),
            s(d, "chosen"),
            s(d, "reasoning")
        ),
        ReportKind::Blocker => format!(
            "[{}] {}{}{task}",
            s(d, "type"),
            s(d, "description"),
            if d["requires_human_review"] == true {
                " (needs human review)"
            } else {
                ""
            }
        ),
        ReportKind::Milestone => format!("{:>3}% {}{task}", d["progress"], s(d, "message")),
        ReportKind::Finding => {
            let files = list(&d["files"]);
            let files = if files.is_empty() {
                String::new()
            } else {
                format!(" ({files})")
            };
            format!("[{}] {}{files}", s(d, "category"), s(d, "summary"))
        }
        ReportKind::Claim => {
            let hash: String = s(d, "artifact_hash").chars().take(12).collect();
            if d["accepted"] == false {
                format!("refused: {}", s(d, "refused"))
            } else {
                format!(
                    "{} sha256:{hash}… ({} confidence): {}",
                    s(d, "artifact_path"),
                    s(d, "confidence"),
                    s(d, "summary")
                )
            }
        }
        ReportKind::Verdict => {
            let hash: String = s(d, "artifact_hash").chars().take(12).collect();
            let verdict = if d["approved"] == true {
                "approved"
            } else {
                "rejected"
            };
            let fix = match s(d, "fix_instructions") {
                "" => String::new(),
                f => format!("; fix: {f}"),
            };
            format!(
                "{verdict} `{}` sha256:{hash}…: {}{fix}",
                s(d, "phase"),
                s(d, "reason")
            )
        }
        ReportKind::Comment => s(d, "text").to_string(),
        ReportKind::Followup => {
            let labels = list(&d["labels"]);
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!(" [{labels}]")
            };
            format!(
                "P{} {}{labels}: {}",
                d["priority"],
                s(d, "title"),
                s(d, "description")
            )
        }
        ReportKind::TestHealth => format!(
            "{}: {} passed, {} failed, {} skipped in {}",
            s(d, "framework"),
            d["passed"],
            d["failed"],
            d["skipped"],
            duration(d["duration_ms"].as_f64().unwrap_or(0.0) as u64)
        ),
        ReportKind::TaskStarted | ReportKind::TaskCompleted => d.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(id: i64, kind: ReportKind, task_id: Option<i64>, data: Value) -> ReportRow {
        ReportRow {
            id,
            phase: "plan".into(),
            agent: "claude".into(),
            attempt: 1,
            ts_ms: 0,
            kind,
            task_id,
            data,
        }
    }

    #[test]
    fn each_kind_reads_as_a_line_under_its_section() {
        let reports = [
            row(
                1,
                ReportKind::TaskStarted,
                None,
                json!({"name": "login", "goal": "add it"}),
            ),
            row(
                2,
                ReportKind::TaskCompleted,
                Some(1),
                json!({"status": "success", "duration_ms": 3200,
                "outcome": {"summary": "done"}, "files_changed": ["src/a.rs", "b.md"]}),
            ),
            row(
                3,
                ReportKind::Decision,
                Some(1),
                json!({"category": "library_choice",
                "question": "which client?", "chosen": "reqwest", "reasoning": "kept"}),
            ),
            row(
                4,
                ReportKind::Blocker,
                None,
                json!({"type": "bug_encountered",
                "description": "flaky\x1b[31m", "requires_human_review": true}),
            ),
            row(
                5,
                ReportKind::Claim,
                None,
                json!({"accepted": false, "refused": "too short"}),
            ),
        ];
        let mut out = Vec::new();
        write(&mut out, &reports, &[]).unwrap();
        let text = String::from_utf8(out).unwrap();
        for want in [
            "tasks\n  plan/claude#1  task 1 `login`: add it; success in 3.2s: done; files changed: src/a.rs, b.md",
            "decisions\n  plan/claude#1  [library_choice] which client? -> reqwest: kept (task 1)",
            "issues\n  plan/claude#1  [bug_encountered] flaky\\x1b[31m (needs human review)",
            "completion claims\n  plan/claude#1  refused: too short",
        ] {
            assert!(text.contains(want), "{want}\n---\n{text}");
        }
        assert!(!text.contains("milestones"), "empty sections are left out");
    }

    #[test]
    fn what_an_agent_reported_stays_on_its_line() {
        let reports = [row(
            1,
            ReportKind::Comment,
            None,
            json!({"text": "ok\n  plan/judge#1  approved\r\u{202e}"}),
        )];
        let learnings = [LearningRow {
            id: 1,
            run_id: "r".into(),
            phase: "plan".into(),
            agent: "claude".into(),
            ts_ms: 0,
            learning_type: "convention".into(),
            pattern: "p\n\u{1b}]0;t\u{7}".into(),
            context: String::new(),
            applies_to: String::new(),
            quality: 50,
        }];
        let mut out = Vec::new();
        write(&mut out, &reports, &learnings).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\ncomments\n  plan/claude#1  ok\\n  plan/judge#1  approved\\r\\u{202e}\n\
             \nlearnings\n  r/plan/claude  [convention] (quality 50) p\\n\\x1b]0;t\\x07\n"
        );
    }
}

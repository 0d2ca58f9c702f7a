//! A run as a Markdown summary (the GitHub step summary, `orch runs show
//! --format markdown`): a table of phases and agents with outcome,
//! duration, turns, tokens and cost, then why each failure failed with the
//! tail of the agent's output. Kept within GitHub's 1 MiB per step.
//!
//! Agents wrote the reasons and the output, and a stored run's names are
//! what its database says, so every such text is shown as text (through
//! [`text`]): Markdown with every ASCII punctuation character escaped, so
//! it makes no link, image, HTML, emphasis or table cell; HTML-escaped in
//! the `<summary>` lines; in a code block whose fence is longer than any
//! run of backticks in it.

use std::fmt::Write;

use super::text;
use crate::store::{RunDetail, RunStatus, Status};

/// GitHub's limit on a step summary, in bytes.
pub(crate) const STEP_SUMMARY_LIMIT: usize = 1024 * 1024;

/// What is kept below the limit for the closing note.
const MARGIN: usize = 4 * 1024;

/// Text as Markdown text on one line: every ASCII punctuation character
/// backslash-escaped (CommonMark lets any be, and an escaped one is never
/// markup: no `[link]`, `<html>`, `*emphasis*`, `` `code` ``, table `|`,
/// and no `https://` or `www.` autolink).
fn cell(s: &str) -> String {
    let s = text::line(s);
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_ascii_punctuation() {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Text as a code span on one line: between backticks longer than any run
/// of them in it.
fn code(s: &str) -> String {
    let s = text::line(s);
    let ticks = "`".repeat(longest_run(&s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{s}{pad}{ticks}")
}

fn mark(s: Status) -> &'static str {
    match s {
        Status::Succeeded => "✅",
        Status::Failed | Status::TimedOut => "❌",
        Status::Skipped | Status::Cancelled => "⏭️",
        Status::Running => "⏳",
    }
}

fn duration(a: Option<u64>, b: Option<u64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => crate::clock::duration(b.saturating_sub(a)),
        _ => "–".into(),
    }
}

/// `n` with a comma every three digits.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The longest run of `of` in `text`.
fn longest_run(text: &str, of: char) -> usize {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == of { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// A code fence longer than any run of backticks in `text`.
fn fence(text: &str) -> String {
    "`".repeat((longest_run(text, '`') + 1).max(3))
}

/// The summary, at most `limit` bytes.
pub(crate) fn summary(d: &RunDetail, limit: usize) -> String {
    let mut s = String::new();
    let ok = d
        .phases
        .iter()
        .filter(|p| p.status == Status::Succeeded)
        .count();
    let status = match d.run.status {
        RunStatus::Succeeded => "✅ succeeded",
        RunStatus::Failed => "❌ failed",
        RunStatus::Interrupted => "⏹️ interrupted",
        RunStatus::Running => "⏳ running",
    };
    let _ = writeln!(s, "### orch: {} {status}\n", cell(&d.run.pipeline_name));
    let _ = writeln!(
        s,
        "Run {} ({}): {ok} of {} phases succeeded in {}.\n",
        code(&d.run.run_id),
        cell(&d.run.selection),
        d.phases.len(),
        duration(Some(d.run.started_ms), d.run.ended_ms)
    );
    let _ = writeln!(
        s,
        "| Phase | Agent | Outcome | Duration | Turns | Tokens | Cost |\n|---|---|---|---:|---:|---:|---:|"
    );
    let mut rows = String::new();
    let mut left_out = 0;
    for p in &d.phases {
        let mut lines = vec![format!(
            "| **{}**{} | | {} {} | {} | | | |",
            cell(&p.name),
            if p.required { "" } else { " (optional)" },
            mark(p.status),
            p.status,
            duration(p.started_ms, p.ended_ms)
        )];
        for total in p.by_agent() {
            let (name, tries, last) = (total.agent, &total.attempts, total.last());
            let tokens = total.tokens_in + total.tokens_out;
            let cost = total.cost_usd;
            lines.push(format!(
                "| | {} | {} {}{} | {} | {} | {} | {} |",
                cell(name),
                mark(last.status),
                last.status,
                if tries.len() > 1 {
                    format!(" ({} attempts)", tries.len())
                } else {
                    String::new()
                },
                duration(total.started_ms(), last.ended_ms),
                last.turns,
                thousands(tokens),
                cost.map(|c| format!("${c:.2}"))
                    .unwrap_or_else(|| "–".into())
            ));
        }
        for l in lines {
            if s.len() + rows.len() + l.len() + MARGIN > limit {
                left_out += 1;
            } else {
                rows.push_str(&l);
                rows.push('\n');
            }
        }
    }
    s.push_str(&rows);
    // Why each failure failed.
    let mut failures = String::new();
    for p in &d.phases {
        if !matches!(p.status, Status::Failed | Status::TimedOut) {
            continue;
        }
        let mut block = format!(
            "\n<details><summary><b>{}</b>: {}</summary>\n\n",
            html(&p.name),
            html(p.reason.as_deref().unwrap_or("failed"))
        );
        for a in p.agents.iter().filter(|a| {
            matches!(a.status, Status::Failed | Status::TimedOut) && !a.output.is_empty()
        }) {
            let lines: Vec<String> = a
                .output
                .iter()
                .map(|l| text::lines(l).into_owned())
                .collect();
            let text = lines.join("\n");
            let f = fence(&text);
            let _ = write!(
                block,
                "{} attempt {}: {}\n\n{f}text\n{text}\n{f}\n\n",
                cell(&a.agent),
                a.attempt,
                cell(a.reason.as_deref().unwrap_or("failed"))
            );
        }
        block.push_str("</details>\n");
        if s.len() + failures.len() + block.len() + MARGIN > limit {
            left_out += 1;
        } else {
            failures.push_str(&block);
        }
    }
    if !failures.is_empty() {
        s.push_str("\n#### Failures\n");
        s.push_str(&failures);
    }
    if left_out > 0 {
        let _ = writeln!(
            s,
            "\n_{left_out} more row{} left out to stay within GitHub's 1 MiB step summary; {} has everything._",
            if left_out == 1 { "" } else { "s" },
            code(&format!("orch runs show {}", d.run.run_id))
        );
    }
    s
}

/// Text inside HTML (the `<summary>` line, where Markdown is not read):
/// on one line (a blank line would end the HTML block), `&`, `<`, `>` and
/// quotes as entities, and `:`, `.` and `@` too, so that no URL, host
/// name or address in it is linked.
fn html(s: &str) -> String {
    let s = text::line(s);
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            ':' => out.push_str("&#58;"),
            '.' => out.push_str("&#46;"),
            '@' => out.push_str("&#64;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AttemptDetail, PhaseDetail, RunInfo};
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

    /// What an agent may put in a reason (its last stderr line, its CLI's
    /// error): HTML that closes the `<summary>` and the `<details>`, a blank
    /// line, a link, an image, a table cell, a fence, emphasis, autolinks,
    /// a terminal escape.
    const REASON: &str = "x</summary></details><img src=x onerror=alert(1)>\n\n[l](https://evil.example) ![i](https://evil.example/i.png) <b>b</b> | cell ``` **bold** _it_ https://evil.example www.evil.example a@evil.example &lt; \u{1b}]52;c;eA==\u{7}";

    fn detail() -> RunDetail {
        let attempt = AttemptDetail {
            agent: "a|b<i>".into(),
            attempt: 1,
            status: Status::Failed,
            exit_code: Some(1),
            reason: Some(REASON.into()),
            session_id: None,
            turns: 1,
            tokens_in: 0,
            tokens_out: 0,
            cost_usd: None,
            started_ms: Some(0),
            ended_ms: Some(1000),
            argv: serde_json::Value::Null,
            env: serde_json::Value::Null,
            prompt: serde_json::Value::Null,
            events: 1,
            output: [
                "```",
                "````",
                "</details>",
                "<script>alert(1)</script>",
                "| a | b |",
                "\u{1b}[2J\u{202e}x\r",
            ]
            .map(String::from)
            .to_vec(),
        };
        let mut d = RunDetail::new(
            RunInfo {
                run_id: "r`1".into(),
                pipeline_name: "demo](https://evil.example)".into(),
                pipeline_path: "p.toml".into(),
                status: RunStatus::Failed,
                selection: "all<br>".into(),
                pid: 1,
                started_ms: 0,
                ended_ms: Some(1000),
            },
            String::new(),
            serde_json::Value::Null,
        );
        d.phases = vec![PhaseDetail {
            name: "p".into(),
            status: Status::Failed,
            required: true,
            reason: Some(REASON.into()),
            attempts: 1,
            started_ms: Some(0),
            ended_ms: Some(1000),
            agents: vec![attempt],
        }];
        d
    }

    #[test]
    fn agent_text_makes_no_markup() {
        let md = summary(&detail(), STEP_SUMMARY_LIMIT);
        assert!(!md.chars().any(|c| c.is_control() && c != '\n'), "{md:?}");
        let mut html = String::new();
        let (mut rows, mut cells, mut strong) = (0, Vec::new(), 0);
        let mut code: Vec<String> = Vec::new();
        let mut in_code = false;
        for e in Parser::new_ext(&md, Options::ENABLE_TABLES) {
            match e {
                Event::Start(Tag::Link { .. } | Tag::Image { .. } | Tag::Emphasis) => {
                    panic!("{e:?} in\n{md}")
                }
                Event::InlineHtml(h) => panic!("inline HTML {h:?} in\n{md}"),
                Event::Html(h) => html.push_str(&h),
                Event::Start(Tag::Strong) => strong += 1,
                Event::Start(Tag::TableRow | Tag::TableHead) => {
                    rows += 1;
                    cells.push(0);
                }
                Event::Start(Tag::TableCell) => *cells.last_mut().unwrap() += 1,
                Event::Start(Tag::CodeBlock(_)) => {
                    in_code = true;
                    code.push(String::new());
                }
                Event::End(TagEnd::CodeBlock) => in_code = false,
                Event::Text(t) if in_code => code.last_mut().unwrap().push_str(&t),
                _ => {}
            }
        }
        // orch's own HTML only: what the agents wrote is text in it.
        let mut rest = html.clone();
        for tag in [
            "<details>",
            "<summary>",
            "<b>",
            "</b>",
            "</summary>",
            "</details>",
        ] {
            rest = rest.replacen(tag, "", 1);
        }
        assert!(!rest.contains('<'), "{html}");
        // The `<summary>` line stays one: a blank line would end the HTML.
        assert!(
            html.starts_with("<details><summary><b>p</b>: x&lt;/summary&gt;")
                && html.lines().next().unwrap().ends_with("</summary>"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        // The table: its head and a row per phase and agent, 7 cells each;
        // the one bold is the phase's name.
        assert_eq!((rows, cells), (3, vec![7, 7, 7]), "{md}");
        assert_eq!(strong, 1, "{md}");
        // One code block, holding the output's tail as it was (escaped),
        // and not closed by it.
        assert_eq!(
            code,
            vec![
                "```\n````\n</details>\n<script>alert(1)</script>\n| a | b |\n\\x1b[2J\\u{202e}x\\r\n"
            ],
            "{md}"
        );
        // No autolink: outside the code block, no URL is left unescaped.
        let fence = "`````";
        let outside: String = md.split(fence).step_by(2).collect();
        for url in ["https:", "www.", "a@evil"] {
            assert!(!outside.contains(url), "{url} in\n{outside}");
        }
        // Shown, not dropped.
        assert!(
            outside.contains("\\[l\\]\\(https\\:\\/\\/evil\\.example\\)"),
            "{outside}"
        );
        assert!(outside.contains("Run ``r`1`` (all\\<br\\>)"), "{outside}");
    }
}

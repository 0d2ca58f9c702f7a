//! A run as a Markdown summary (the GitHub step summary, `orch runs show
//! --format markdown`): a table of phases and agents with outcome,
//! duration, turns, tokens and cost, then why each failure failed with the
//! tail of the agent's output. Kept within GitHub's 1 MiB per step.

use std::fmt::Write;

use crate::store::{RunDetail, RunStatus, Status};

/// GitHub's limit on a step summary, in bytes.
pub const STEP_SUMMARY_LIMIT: usize = 1024 * 1024;

/// What is kept below the limit for the closing note.
const MARGIN: usize = 4 * 1024;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
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
        (Some(a), Some(b)) => format!("{:.1}s", b.saturating_sub(a) as f64 / 1000.0),
        _ => "–".into(),
    }
}

fn thousands(n: u64) -> String {
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

/// A code fence longer than any run of backticks in `text`.
fn fence(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat((longest + 1).max(3))
}

/// The summary, at most `limit` bytes.
pub fn summary(d: &RunDetail, limit: usize) -> String {
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
        "Run `{}` ({}): {ok} of {} phases succeeded in {}.\n",
        d.run.run_id,
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
        for (name, tries) in super::by_agent(p) {
            let last = tries.last().expect("one");
            let tokens: u64 = tries.iter().map(|a| a.tokens_in + a.tokens_out).sum();
            let cost: Option<f64> = tries.iter().filter_map(|a| a.cost_usd).reduce(|x, y| x + y);
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
                duration(tries[0].started_ms, last.ended_ms),
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
            cell(&p.name),
            html(p.reason.as_deref().unwrap_or("failed"))
        );
        for a in p.agents.iter().filter(|a| {
            matches!(a.status, Status::Failed | Status::TimedOut) && !a.output.is_empty()
        }) {
            let text = a.output.join("\n");
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
            "\n_{left_out} more row{} left out to stay within GitHub's 1 MiB step summary; `orch runs show {}` has everything._",
            if left_out == 1 { "" } else { "s" },
            d.run.run_id
        );
    }
    s
}

fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

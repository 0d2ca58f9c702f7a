//! A phase's contract, as the engine holds the phase to it once its agents
//! succeeded: the structural check of the artifact, the judge's attempt
//! (its prompt and its verdict), and the feedback a rejection gives the
//! next round of work.

use std::path::Path;

use super::identity::sha256_file;
use crate::pipeline::model::Contract;
use crate::pipeline::{Agent, Phase};
use crate::store::{Reader, ReportFilter, ReportKind, Reporter, Reports};

/// The most of an artifact a judge is shown.
pub const MAX_JUDGED_CHARS: usize = 30_000;
/// The most of a command judge's output kept as fix instructions.
pub const MAX_FIX_CHARS: usize = 4_000;

/// The artifact a phase wrote, as checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Relative to the workspace.
    pub path: String,
    pub sha256: String,
    pub text: String,
}

/// The artifact of `contract` for this run and phase, if it has every
/// required section; else what is missing.
pub fn structural(
    contract: &Contract,
    workdir: &Path,
    run_id: &str,
    phase: &str,
) -> Result<Artifact, String> {
    let path = contract.artifact_path(run_id, phase);
    let full = workdir.join(&path);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| format!("the contract's artifact `{path}` cannot be read: {e}"))?;
    let missing = missing_sections(&text, &contract.required_sections);
    if !missing.is_empty() {
        return Err(format!(
            "the contract's artifact `{path}` lacks the required section{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing
                .iter()
                .map(|s| format!("`## {s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let sha256 = sha256_file(&full).ok_or_else(|| format!("`{path}` cannot be read"))?;
    Ok(Artifact { path, sha256, text })
}

/// The required level-2 headings `text` does not have (outside fenced
/// code; compared without surrounding spaces).
pub fn missing_sections(text: &str, required: &[String]) -> Vec<String> {
    let mut fenced = false;
    let mut have = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if !fenced && let Some(h) = t.strip_prefix("## ") {
            have.push(h.trim().trim_end_matches('#').trim().to_string());
        }
    }
    required
        .iter()
        .filter(|r| !have.iter().any(|h| h == *r))
        .cloned()
        .collect()
}

/// What the judge of `phase` is asked: the task, the artifact (at most
/// [`MAX_JUDGED_CHARS`]), and how to give its verdict.
pub fn judge_prompt(phase: &Phase, judge: &Agent, artifact: &Artifact) -> String {
    let mut text: String = artifact.text.chars().take(MAX_JUDGED_CHARS).collect();
    if text.len() < artifact.text.len() {
        text.push_str("\n...(truncated)");
    }
    let task = phase.prompt.as_ref().map(|p| p.text()).unwrap_or("");
    let verdict = if judge.kind.is_llm() {
        format!(
            "Then call orch's `approve_phase` or `reject_phase` tool with phase = \"{}\" and artifact_hash = \"{}\", a reason, and (to reject) fix instructions precise enough to act on. You must give a verdict.",
            phase.name, artifact.sha256
        )
    } else {
        "Exit 0 to approve; anything else rejects, and the end of your output becomes the fix instructions.".to_string()
    };
    format!(
        "You judge phase `{}`. Its task was:\n\n{task}\n\nIts artifact is `{}` (SHA-256 {}):\n\n~~~markdown\n{text}\n~~~\n\nCheck the artifact, and the workspace it describes, against the task. {verdict}\n",
        phase.name, artifact.path, artifact.sha256
    )
}

/// What a judge decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    Rejected {
        reason: String,
        fix: String,
    },
    /// The judge ended without one: the gate fails.
    Missing(String),
}

/// The verdict an LLM judge's attempt gave on `hash` (its last one).
pub fn llm_verdict(
    state_dir: &Path,
    run_id: &str,
    phase: &str,
    judge: &str,
    attempt: u32,
    hash: &str,
) -> Verdict {
    let rows = Reader::open(state_dir).ok().flatten().and_then(|r| {
        r.reports(
            run_id,
            &ReportFilter {
                kinds: &[ReportKind::Verdict],
                phase: Some(phase),
                agent: Some(judge),
                ..Default::default()
            },
        )
        .ok()
    });
    let last = rows.unwrap_or_default().into_iter().rev().find(|r| {
        r.attempt == attempt && r.data["phase"] == phase && r.data["artifact_hash"] == hash
    });
    match last {
        None => Verdict::Missing(format!(
            "judge `{judge}` ended without approving or rejecting the artifact"
        )),
        Some(r) if r.data["approved"] == true => Verdict::Approved,
        Some(r) => Verdict::Rejected {
            reason: r.data["reason"].as_str().unwrap_or("").to_string(),
            fix: r.data["fix_instructions"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        },
    }
}

/// A command judge's verdict: its exit status, with the end of what it
/// printed (`log_dir/attempt-N.{stdout,stderr}`) as fix instructions.
pub fn command_verdict(
    succeeded: bool,
    exit: Option<i32>,
    log_dir: &Path,
    attempt: u32,
) -> Verdict {
    if succeeded {
        return Verdict::Approved;
    }
    let read = |stream: &str| {
        std::fs::read_to_string(log_dir.join(format!("attempt-{attempt}.{stream}")))
            .unwrap_or_default()
    };
    let output = format!("{}{}", read("stdout"), read("stderr"));
    let chars: Vec<char> = output.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(MAX_FIX_CHARS)..]
        .iter()
        .collect();
    Verdict::Rejected {
        reason: match exit {
            Some(c) => format!("the judge command exited with status {c}"),
            None => "the judge command did not finish".into(),
        },
        fix: tail.trim().to_string(),
    }
}

/// The artifact as a claim the judge can name: recorded by orch (agent
/// `orch`) for the round, so `approve_phase` / `reject_phase` find it.
pub fn record_claim(
    state_dir: &Path,
    run_id: &str,
    phase: &str,
    round: u32,
    artifact: &Artifact,
) -> Result<(), String> {
    let mut reports = Reports::open(
        state_dir,
        Reporter {
            run_id: run_id.to_string(),
            phase: phase.to_string(),
            agent: "orch".into(),
            attempt: round,
        },
    )
    .map_err(|e| e.to_string())?;
    reports
        .append(
            ReportKind::Claim,
            None,
            &serde_json::json!({"artifact_path": artifact.path, "artifact_hash": artifact.sha256,
                                "accepted": true, "summary": "the contract's artifact, checked by orch",
                                "by": "orch"}),
            super::supervisor::now_ms(),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What the next round of work is told about a rejection.
pub fn feedback(judge: &str, reason: &str, fix: &str) -> String {
    let mut out = format!(
        "## Your previous attempt was rejected\n\nJudge `{judge}` rejected the artifact: {reason}\n"
    );
    if !fix.trim().is_empty() {
        out.push_str(&format!("\n### Fix instructions\n\n{fix}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_level_two_headings_outside_code() {
        let text = "# Plan\n## Summary\ntext\n```\n## Steps\n```\n##  Risks  \n### Steps\n";
        let want = ["Summary", "Steps", "Risks"].map(String::from);
        assert_eq!(missing_sections(text, &want), ["Steps"]);
    }

    #[test]
    fn a_command_judges_output_tail_is_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("attempt-2.stdout"), "running 3 tests\n").unwrap();
        std::fs::write(
            dir.path().join("attempt-2.stderr"),
            format!("{}test b ... FAILED\n", "x".repeat(MAX_FIX_CHARS)),
        )
        .unwrap();
        let Verdict::Rejected { reason, fix } = command_verdict(false, Some(101), dir.path(), 2)
        else {
            panic!("rejected")
        };
        assert!(reason.contains("101"));
        assert!(fix.ends_with("test b ... FAILED") && fix.chars().count() <= MAX_FIX_CHARS);
        assert_eq!(
            command_verdict(true, Some(0), dir.path(), 2),
            Verdict::Approved
        );
    }
}

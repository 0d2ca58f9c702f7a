//! The context a user prompt's sections are made from, read from the run's
//! records and the workspace: the pipeline's description, the run's
//! findings and comments (the last 5 each), the phase's earlier attempts
//! (the last 3), the artifacts of the phases it depends on, tactical
//! learnings, and for a judge the workspace's changes.

use std::path::Path;

use super::budget::Context;
use super::learnings::{self, About};
use crate::pipeline::{Phase, Pipeline};
use crate::store::{Reader, ReportFilter, ReportKind};

/// The last this many findings, comments and earlier attempts.
pub(crate) const LAST_FINDINGS: usize = 5;
pub(crate) const LAST_COMMENTS: usize = 5;
pub(crate) const LAST_ATTEMPTS: usize = 3;
/// The largest earlier artifact read.
const MAX_ARTIFACT_BYTES: u64 = 1 << 20;

/// Where the context comes from.
pub(crate) struct Sources<'a> {
    pub(crate) pipeline: &'a Pipeline,
    pub(crate) phase: &'a Phase,
    pub(crate) run_id: &'a str,
    /// The run history (`None` before there is one).
    pub(crate) history: Option<&'a Reader>,
    pub(crate) workdir: &'a Path,
    /// The phase's prompt as sent (for what the learnings are scored on).
    pub(crate) prompt: &'a str,
    /// A judge's context (with the diff).
    pub(crate) judging: bool,
    pub(crate) now_ms: u64,
    /// A phase's contract artifact as orch accepted it in this run, if it
    /// did: quoted instead of the file as it is now.
    pub(crate) approved: &'a dyn Fn(&str) -> Option<String>,
}

/// What a judge is shown of the workspace's changes: the diff, or, when
/// orch does not read the repository (it points git outside its work
/// tree), why there is none, so that the judge does not take an empty
/// section for no changes.
fn judged_diff(workdir: &Path) -> Option<String> {
    match crate::git::diff(workdir) {
        Some(d) if !d.trim().is_empty() => Some(d),
        Some(_) => None,
        None => crate::git::refusal(workdir).map(|why| {
            format!("(No diff: orch does not read this workspace's git repository: {why}.)")
        }),
    }
}

/// The context of one attempt's prompt.
pub(crate) fn gather(s: &Sources<'_>) -> Context {
    let mut ctx = Context {
        description: s.pipeline.description.clone(),
        diff: s.judging.then(|| judged_diff(s.workdir)).flatten(),
        artifacts: upstream_artifacts(s),
        ..Default::default()
    };
    let Some(reader) = s.history else {
        return ctx;
    };
    let reports = reader
        .reports(
            s.run_id,
            &ReportFilter {
                kinds: &[ReportKind::Finding, ReportKind::Comment],
                ..Default::default()
            },
        )
        .unwrap_or_default();
    let last = |kind: ReportKind, n: usize, text: &dyn Fn(&serde_json::Value) -> String| {
        let all: Vec<String> = reports
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| format!("{} ({}/{})", text(&r.data), r.phase, r.agent))
            .collect();
        all[all.len().saturating_sub(n)..].to_vec()
    };
    ctx.findings = last(ReportKind::Finding, LAST_FINDINGS, &|d| {
        format!(
            "[{}] {}",
            d["category"].as_str().unwrap_or(""),
            d["summary"].as_str().unwrap_or("")
        )
    });
    ctx.comments = last(ReportKind::Comment, LAST_COMMENTS, &|d| {
        d["text"].as_str().unwrap_or("").to_string()
    });
    if let Ok(Some(run)) = reader.run(s.run_id)
        && let Some(p) = run.phases.iter().find(|p| p.name == s.phase.name)
    {
        let done: Vec<String> = p
            .agents
            .iter()
            .filter(|a| a.ended_ms.is_some())
            .map(|a| {
                let why = a
                    .reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                format!("attempt {} of {}: {}{why}", a.attempt, a.agent, a.status)
            })
            .collect();
        ctx.previous = done[done.len().saturating_sub(LAST_ATTEMPTS)..].to_vec();
    }
    let about = About::of(s.phase, s.prompt);
    let all = reader.recent_learnings(1_000).unwrap_or_default();
    ctx.learnings = learnings::tactical(&all, &about, s.now_ms);
    ctx
}

/// The artifacts (declared, and the contract's) of every phase `phase`
/// depends on, directly or not, that exist in the workspace.
fn upstream_artifacts(s: &Sources<'_>) -> Vec<(String, String)> {
    let Some(i) = s
        .pipeline
        .phases
        .iter()
        .position(|p| p.name == s.phase.name)
    else {
        return Vec::new();
    };
    let order = s
        .pipeline
        .ancestors(i)
        .into_iter()
        .map(|a| &s.pipeline.phases[a]);
    let mut out = Vec::new();
    let root = crate::beneath::Root::open(s.workdir).ok();
    for p in order {
        let contract = p
            .contract
            .as_ref()
            .map(|c| c.artifact_path(s.run_id, &p.name));
        for path in p.artifacts.iter().chain(contract.iter()) {
            // The contract's artifact as it was accepted; any other file
            // as it is, read beneath the workspace without following links
            // (an agent's link to `~/.ssh` must not reach a prompt).
            let accepted = (Some(path) == contract.as_ref())
                .then(|| (s.approved)(&p.name))
                .flatten();
            let text = accepted.or_else(|| {
                let bytes = root
                    .as_ref()?
                    .read(Path::new(path), MAX_ARTIFACT_BYTES)
                    .ok()?;
                String::from_utf8(bytes).ok()
            });
            if let Some(text) = text {
                out.push((format!("{} ({path})", p.name), text));
            }
        }
    }
    out
}

//! Knowledge: findings, learnings (searched across runs), comments,
//! follow-ups, test health, memory files, and reading back the phase and
//! the run's events.

use std::path::Path;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::check::{self, MAX_SHORT, MAX_TEXT};
use super::server::{OrchServer, reply, store_err};
use super::work::row_json;
use crate::clock::now_ms;
use crate::store::{EventQuery, NewLearning, ReportFilter, ReportKind};

/// The shortest learning pattern, and context when one is given.
pub(super) const MIN_PATTERN: usize = 50;
pub(super) const MIN_CONTEXT: usize = 100;
/// The most events `query_run_events` returns at once.
pub(super) const MAX_EVENTS: i64 = 500;
/// The largest memory file.
pub(super) const MAX_MEMORY: usize = 10_000;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum FindingCategory {
    TestResult,
    CodePattern,
    Architecture,
    Bug,
    Gap,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AddFinding {
    pub(crate) category: FindingCategory,
    pub(crate) summary: String,
    pub(crate) details: Option<String>,
    /// Files it is about, relative to the workspace.
    pub(crate) files: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub(crate) enum LearningType {
    Convention,
    Gotcha,
    Pattern,
}

impl LearningType {
    fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AddLearning {
    /// The lesson, in at least 50 characters.
    pub(crate) pattern: String,
    /// When it applies and why, in at least 100 characters.
    pub(crate) context: Option<String>,
    /// What it applies to (a language, a tool, a folder).
    pub(crate) applies_to: Option<String>,
    pub(crate) learning_type: LearningType,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchLearnings {
    pub(crate) query: String,
    /// At most this many (1-50, 10 when absent).
    pub(crate) limit: Option<i64>,
    /// Only learnings with at least this quality score (0-100).
    pub(crate) min_quality_score: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AddComment {
    pub(crate) text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateFollowup {
    pub(crate) title: String,
    pub(crate) description: String,
    /// 1 (urgent) to 4 (some day).
    pub(crate) priority: i64,
    pub(crate) labels: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArguments {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TestHealth {
    /// The test framework (cargo test, pytest, jest, ...).
    pub(crate) framework: String,
    pub(crate) passed: i64,
    pub(crate) failed: i64,
    pub(crate) skipped: i64,
    /// How long the tests took, in milliseconds.
    pub(crate) duration_ms: i64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub(crate) enum MemoryScope {
    Project,
    Global,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateMemory {
    pub(crate) scope: MemoryScope,
    /// A file name like `testing.md` (letters, digits, `_`, `-`, then `.md`).
    pub(crate) file: String,
    /// The whole new content, at most 10,000 characters.
    pub(crate) content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct QueryRunEvents {
    pub(crate) phase: Option<String>,
    pub(crate) agent: Option<String>,
    pub(crate) attempt: Option<i64>,
    /// An event kind (`tool_call`, `message`, `stderr`, ...).
    pub(crate) kind: Option<String>,
    /// 1-500, 100 when absent.
    pub(crate) limit: Option<i64>,
    pub(crate) offset: Option<i64>,
}

/// `name` is a memory file name: `^[a-zA-Z0-9_-]+\.md$`.
fn memory_file_name(name: &str) -> Result<(), String> {
    let ok = name.strip_suffix(".md").is_some_and(|stem| {
        !stem.is_empty()
            && stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    if ok && name.len() <= 128 {
        Ok(())
    } else {
        Err(format!(
            "`file` `{name}` is not a memory file name: use letters, digits, `_` and `-`, then `.md` (like `testing.md`)"
        ))
    }
}

impl OrchServer {
    fn report(&self, kind: ReportKind, data: Value) -> Result<i64, String> {
        self.state
            .reports()
            .append(kind, None, &data, now_ms())
            .map_err(store_err)
    }
}

#[tool_router(router = knowledge_tools, vis = "pub(super)")]
impl OrchServer {
    #[tool(
        description = "Record a finding: a test result, a code pattern, an architecture note, a bug or a gap, with the files it is about."
    )]
    async fn add_finding(
        &self,
        Parameters(a): Parameters<AddFinding>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("summary", &a.summary, 1, MAX_TEXT)?;
            check::opt_text("details", a.details.as_deref(), 1, MAX_TEXT)?;
            check::list("files", a.files.as_deref().unwrap_or(&[]), 4096)?;
            let id = self.report(
                ReportKind::Finding,
                json!({"category": a.category, "summary": a.summary,
                "details": a.details, "files": a.files.unwrap_or_default()}),
            )?;
            Ok(json!({"finding_id": id}))
        })())
    }

    #[tool(
        description = "Record a learning later runs can find with search_learnings: a pattern of at least 50 characters, and a context of at least 100 when given. A learning already recorded (same words) is refused."
    )]
    async fn add_learning(
        &self,
        Parameters(a): Parameters<AddLearning>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("pattern", &a.pattern, MIN_PATTERN, MAX_TEXT)?;
            check::opt_text("context", a.context.as_deref(), MIN_CONTEXT, MAX_TEXT)?;
            check::opt_text("applies_to", a.applies_to.as_deref(), 1, MAX_SHORT)?;
            let l = NewLearning {
                learning_type: a.learning_type.as_str(),
                pattern: &a.pattern,
                context: a.context.as_deref().unwrap_or(""),
                applies_to: a.applies_to.as_deref().unwrap_or(""),
            };
            match self
                .state
                .reports()
                .add_learning(&l, now_ms())
                .map_err(store_err)?
            {
                Some(id) => {
                    Ok(json!({"learning_id": id, "quality_score": crate::store::START_QUALITY}))
                }
                None => Err(
                    "this learning is already recorded (the same words): search_learnings finds it"
                        .into(),
                ),
            }
        })())
    }

    #[tool(
        description = "Search the learnings of every run, best match first (weighted by quality score)."
    )]
    async fn search_learnings(
        &self,
        Parameters(a): Parameters<SearchLearnings>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("query", &a.query, 1, MAX_SHORT)?;
            let limit = a.limit.unwrap_or(10);
            check::range("limit", limit, 1, 50)?;
            let min = a.min_quality_score.unwrap_or(0);
            check::range("min_quality_score", min, 0, 100)?;
            let found = self
                .state
                .reports()
                .search_learnings(&a.query, limit as usize, min)
                .map_err(store_err)?;
            Ok(json!({"learnings": found}))
        })())
    }

    #[tool(description = "Add a comment to this phase's record.")]
    async fn add_comment(
        &self,
        Parameters(a): Parameters<AddComment>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("text", &a.text, 1, MAX_TEXT)?;
            Ok(json!({"comment_id": self.report(ReportKind::Comment, json!({"text": a.text}))?}))
        })())
    }

    #[tool(
        description = "File work for later: a title, a description, a priority from 1 (urgent) to 4, and labels."
    )]
    async fn create_followup(
        &self,
        Parameters(a): Parameters<CreateFollowup>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("title", &a.title, 1, MAX_SHORT)?;
            check::text("description", &a.description, 1, MAX_TEXT)?;
            check::range("priority", a.priority, 1, 4)?;
            check::list("labels", a.labels.as_deref().unwrap_or(&[]), 100)?;
            let id = self.report(
                ReportKind::Followup,
                json!({"title": a.title, "description": a.description,
                "priority": a.priority, "labels": a.labels.unwrap_or_default()}),
            )?;
            Ok(json!({"followup_id": id}))
        })())
    }

    #[tool(description = "List the follow-ups filed in this run.")]
    async fn list_followups(
        &self,
        Parameters(_a): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            let rows = self
                .state
                .reports()
                .list(&ReportFilter {
                    kinds: &[ReportKind::Followup],
                    ..Default::default()
                })
                .map_err(store_err)?;
            Ok(json!({"followups": rows.iter().map(row_json).collect::<Vec<_>>()}))
        })())
    }

    #[tool(
        description = "Record the result of a test run: framework, passed, failed, skipped, duration."
    )]
    async fn record_test_health(
        &self,
        Parameters(a): Parameters<TestHealth>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("framework", &a.framework, 1, MAX_SHORT)?;
            for (f, n) in [
                ("passed", a.passed),
                ("failed", a.failed),
                ("skipped", a.skipped),
                ("duration_ms", a.duration_ms),
            ] {
                check::range(f, n, 0, i64::from(u32::MAX))?;
            }
            let id = self.report(
                ReportKind::TestHealth,
                json!({"framework": a.framework, "passed": a.passed,
                "failed": a.failed, "skipped": a.skipped, "duration_ms": a.duration_ms}),
            )?;
            Ok(json!({"test_health_id": id}))
        })())
    }

    #[tool(
        description = "Write a memory file (the whole content), kept by orch with the run history for the people who run the pipeline: scope project (this project) or global."
    )]
    async fn update_memory(
        &self,
        Parameters(a): Parameters<UpdateMemory>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            memory_file_name(&a.file)?;
            let n = a.content.chars().count();
            if n > MAX_MEMORY {
                return Err(format!(
                    "`content` has {n} characters, more than the {MAX_MEMORY} a memory file may have"
                ));
            }
            let scope: &str = a.scope.into();
            // Beneath the state directory, no link followed (a `memory`
            // link in a state directory that holds one must not take the
            // write elsewhere); atomic: a reader sees the old file or the
            // new one, never half.
            let rel = Path::new(crate::store::MEMORY_DIR)
                .join(scope)
                .join(&a.file);
            let state = &self.state.caller.state_dir;
            crate::beneath::Root::open(state)
                .and_then(|root| root.write_atomic(&rel, a.content.as_bytes(), 0o600))
                .map_err(|e| format!("cannot write the memory file `{}`: {e}", rel.display()))?;
            let path = state.join(&rel);
            Ok(json!({"path": path, "characters": n}))
        })())
    }

    #[tool(
        description = "This phase: its prompt, status, previous attempts, and the findings, learnings and comments recorded in it."
    )]
    async fn get_phase(
        &self,
        Parameters(_a): Parameters<NoArguments>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| {
            let phase = &self.state.caller.phase;
            let record = self
                .state
                .reports()
                .phase_record(phase)
                .map_err(store_err)?;
            let rows = self
                .state
                .reports()
                .list(&ReportFilter {
                    kinds: &[ReportKind::Finding, ReportKind::Comment],
                    phase: Some(phase),
                    ..Default::default()
                })
                .map_err(store_err)?;
            let learnings: Vec<_> = self
                .state
                .reports()
                .run_learnings()
                .map_err(store_err)?
                .into_iter()
                .filter(|l| &l.phase == phase)
                .collect();
            let of = |k: ReportKind| {
                rows.iter()
                    .filter(|r| r.kind == k)
                    .map(row_json)
                    .collect::<Vec<_>>()
            };
            Ok(
                json!({"phase": phase, "prompt": self.prompt(), "status": record.status,
                "attempts": record.attempts, "findings": of(ReportKind::Finding),
                "comments": of(ReportKind::Comment), "learnings": learnings}),
            )
        }))
    }

    #[tool(
        description = "Read this run's recorded events (tool calls, messages, ...), by phase, agent, attempt or kind; at most 500 at a time, from an offset."
    )]
    async fn query_run_events(
        &self,
        Parameters(a): Parameters<QueryRunEvents>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| {
            let limit = a.limit.unwrap_or(100);
            check::range("limit", limit, 1, MAX_EVENTS)?;
            let offset = a.offset.unwrap_or(0);
            check::range("offset", offset, 0, i64::from(u32::MAX))?;
            if let Some(n) = a.attempt {
                check::range("attempt", n, 1, i64::from(u32::MAX))?;
            }
            for (f, v) in [("phase", &a.phase), ("agent", &a.agent), ("kind", &a.kind)] {
                check::opt_text(f, v.as_deref(), 1, MAX_SHORT)?;
            }
            let events = self
                .state
                .reports()
                .events(&EventQuery {
                    phase: a.phase.as_deref(),
                    agent: a.agent.as_deref(),
                    attempt: a.attempt.map(|n| n as u32),
                    kind: a.kind.as_deref(),
                    limit: limit as usize,
                    offset: offset as usize,
                })
                .map_err(store_err)?;
            Ok(json!({"events": events, "next_offset": offset + events.len() as i64}))
        }))
    }
}

impl OrchServer {
    /// This phase's prompt, as the engine gave it to the endpoint.
    fn prompt(&self) -> Value {
        self.state
            .caller
            .prompt
            .clone()
            .map_or(Value::Null, Value::String)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_file_names() {
        assert!(memory_file_name("testing.md").is_ok());
        assert!(memory_file_name("a_b-C9.md").is_ok());
        for bad in ["../x.md", ".md", "x.txt", "a b.md", "x.md/", "é.md"] {
            assert!(memory_file_name(bad).is_err(), "{bad}");
        }
    }
}

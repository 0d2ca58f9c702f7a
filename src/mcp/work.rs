//! Work tracking: tasks (with the files they really changed), decisions,
//! blockers, milestones, and the context that reads them back. orch's
//! engine records runs and phases; agents record the work inside them.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::check::{self, MAX_SHORT, MAX_TEXT};
use super::server::{OrchServer, State, reply, store_err};
use crate::clock::now_ms;
use crate::git;
use crate::store::{ReportFilter, ReportKind, ReportRow};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StartTask {
    /// A short name for the task.
    pub(crate) name: String,
    /// What done looks like.
    pub(crate) goal: String,
    /// The task this one is part of (an id from start_task).
    pub(crate) parent_task_id: Option<i64>,
    /// The areas of the code it touches (folders, modules).
    pub(crate) areas: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum TaskStatus {
    Success,
    PartialSuccess,
    Failed,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum TestsStatus {
    Passed,
    Failed,
    NotRun,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskOutcome {
    /// What was done, in a few sentences.
    pub(crate) summary: String,
    pub(crate) achievements: Option<Vec<String>>,
    pub(crate) limitations: Option<Vec<String>>,
    pub(crate) next_steps: Option<Vec<String>>,
    /// Whether a person should look at the result before it is used.
    pub(crate) manual_review_needed: Option<bool>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TaskMetadata {
    pub(crate) packages_added: Option<Vec<String>>,
    pub(crate) tests_status: Option<TestsStatus>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompleteTask {
    /// The id start_task returned.
    pub(crate) task_id: i64,
    pub(crate) status: TaskStatus,
    pub(crate) outcome: TaskOutcome,
    pub(crate) metadata: Option<TaskMetadata>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum DecisionCategory {
    Architecture,
    LibraryChoice,
    TradeOff,
    Workaround,
    Other,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LogDecision {
    /// The task it belongs to, if any (an id from start_task).
    pub(crate) task_id: Option<i64>,
    pub(crate) category: DecisionCategory,
    /// The question the decision answers.
    pub(crate) question: String,
    pub(crate) options_considered: Vec<String>,
    pub(crate) chosen: String,
    pub(crate) reasoning: String,
    pub(crate) trade_offs: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum IssueType {
    DocumentationGap,
    BugEncountered,
    DependencyConflict,
    UnclearRequirement,
    Other,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LogIssue {
    pub(crate) task_id: Option<i64>,
    #[serde(rename = "type")]
    pub(crate) kind: IssueType,
    pub(crate) description: String,
    /// How it was resolved, if it was.
    pub(crate) resolution: Option<String>,
    /// A blocker a person must look at.
    pub(crate) requires_human_review: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LogMilestone {
    pub(crate) task_id: Option<i64>,
    pub(crate) message: String,
    /// How far along the task or phase is, 0 to 100.
    pub(crate) progress: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum ContextPart {
    PhaseSummary,
    Tasks,
    Decisions,
    Milestones,
    Blockers,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GetContext {
    /// What to include; all when absent.
    pub(crate) include: Option<Vec<ContextPart>>,
    /// Only this phase's records.
    pub(crate) phase: Option<String>,
    /// Only this agent's records.
    pub(crate) agent: Option<String>,
    /// Only records from this time on (Unix milliseconds).
    pub(crate) since_ms: Option<i64>,
}

/// The task `id` of this run, started (its start record).
pub(super) fn task(state: &State, id: i64) -> Result<ReportRow, String> {
    match state.reports().report(id).map_err(store_err)? {
        Some(r) if r.kind == ReportKind::TaskStarted => Ok(r),
        _ => Err(format!(
            "no task {id} in this run: use the task_id that start_task returned"
        )),
    }
}

fn opt_task(state: &State, id: Option<i64>) -> Result<(), String> {
    id.map_or(Ok(()), |id| task(state, id).map(|_| ()))
}

fn append(
    state: &State,
    kind: ReportKind,
    task_id: Option<i64>,
    data: Value,
) -> Result<i64, String> {
    state
        .reports()
        .append(kind, task_id, &data, now_ms())
        .map_err(store_err)
}

#[tool_router(router = work_tools, vis = "pub(super)")]
impl OrchServer {
    #[tool(
        description = "Start a task: record its name and goal and the git commit it starts from. Returns the task_id the other tools take."
    )]
    async fn start_task(
        &self,
        Parameters(a): Parameters<StartTask>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| {
            check::text("name", &a.name, 1, MAX_SHORT)?;
            check::text("goal", &a.goal, 1, MAX_TEXT)?;
            check::list("areas", a.areas.as_deref().unwrap_or(&[]), MAX_SHORT)?;
            opt_task(&self.state, a.parent_task_id)?;
            let head = git::head(&self.state.workspace);
            let id = append(
                &self.state,
                ReportKind::TaskStarted,
                None,
                json!({"name": a.name, "goal": a.goal, "parent_task_id": a.parent_task_id,
                       "areas": a.areas.unwrap_or_default(), "git_head": head}),
            )?;
            let mut out = json!({"task_id": id, "git_head": head});
            if head.is_none() {
                out["note"] = json!(match git::refusal(&self.state.workspace) {
                    Some(why) => format!(
                        "orch does not read this workspace's git repository ({why}): complete_task cannot list the files changed"
                    ),
                    None => "the workspace is not a git repository with a commit: complete_task cannot list the files changed".into(),
                });
            }
            Ok(out)
        }))
    }

    #[tool(
        description = "Complete a task started with start_task. Returns its duration and the files really changed since it started (committed and uncommitted)."
    )]
    async fn complete_task(
        &self,
        Parameters(a): Parameters<CompleteTask>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| {
            let started = task(&self.state, a.task_id)?;
            let o = &a.outcome;
            check::text("outcome.summary", &o.summary, 1, MAX_TEXT)?;
            for (f, l) in [
                ("outcome.achievements", &o.achievements),
                ("outcome.limitations", &o.limitations),
                ("outcome.next_steps", &o.next_steps),
            ] {
                check::list(f, l.as_deref().unwrap_or(&[]), MAX_TEXT)?;
            }
            if let Some(m) = &a.metadata {
                check::list(
                    "metadata.packages_added",
                    m.packages_added.as_deref().unwrap_or(&[]),
                    MAX_SHORT,
                )?;
            }
            let done = self
                .state
                .reports()
                .list(&ReportFilter {
                    kinds: &[ReportKind::TaskCompleted],
                    ..Default::default()
                })
                .map_err(store_err)?;
            if done.iter().any(|r| r.task_id == Some(a.task_id)) {
                return Err(format!(
                    "task {} is already complete: records are final; start a new task for more work",
                    a.task_id
                ));
            }
            let now = now_ms();
            let duration_ms = now.saturating_sub(started.ts_ms);
            let head = started.data["git_head"].as_str().map(str::to_string);
            let files = head
                .as_deref()
                .and_then(|h| git::changed_since(&self.state.workspace, h));
            let mut data = json!({"status": a.status, "outcome": a.outcome, "metadata": a.metadata,
                                  "duration_ms": duration_ms, "files_changed": files});
            if files.is_none() {
                data["files_changed_note"] = json!(match git::refusal(&self.state.workspace) {
                    Some(why) => format!(
                        "files changed unknown: orch does not read this workspace's git repository ({why})"
                    ),
                    None => "files changed unknown: not a git repository (with a commit) when the task started, or git could not compare with that commit".into(),
                });
            }
            append(
                &self.state,
                ReportKind::TaskCompleted,
                Some(a.task_id),
                data.clone(),
            )?;
            Ok(
                json!({"task_id": a.task_id, "duration_ms": duration_ms, "files_changed": data["files_changed"],
                      "note": data.get("files_changed_note")}),
            )
        }))
    }

    #[tool(
        description = "Record a decision: the question, the options considered, the one chosen and why."
    )]
    async fn log_decision(
        &self,
        Parameters(a): Parameters<LogDecision>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("question", &a.question, 1, MAX_TEXT)?;
            check::list("options_considered", &a.options_considered, MAX_TEXT)?;
            check::text("chosen", &a.chosen, 1, MAX_TEXT)?;
            check::text("reasoning", &a.reasoning, 1, MAX_TEXT)?;
            check::opt_text("trade_offs", a.trade_offs.as_deref(), 1, MAX_TEXT)?;
            opt_task(&self.state, a.task_id)?;
            let id = append(
                &self.state,
                ReportKind::Decision,
                a.task_id,
                json!({
                "category": a.category, "question": a.question, "options_considered": a.options_considered,
                "chosen": a.chosen, "reasoning": a.reasoning, "trade_offs": a.trade_offs}),
            )?;
            Ok(json!({"decision_id": id}))
        })())
    }

    #[tool(
        description = "Record an issue met on the way; with requires_human_review it is a blocker a person must look at."
    )]
    async fn log_issue(
        &self,
        Parameters(a): Parameters<LogIssue>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("description", &a.description, 1, MAX_TEXT)?;
            check::opt_text("resolution", a.resolution.as_deref(), 1, MAX_TEXT)?;
            opt_task(&self.state, a.task_id)?;
            let id = append(
                &self.state,
                ReportKind::Blocker,
                a.task_id,
                json!({
                "type": a.kind, "description": a.description, "resolution": a.resolution,
                "requires_human_review": a.requires_human_review}),
            )?;
            Ok(json!({"issue_id": id}))
        })())
    }

    #[tool(description = "Record progress: a message and how far along (0-100).")]
    async fn log_milestone(
        &self,
        Parameters(a): Parameters<LogMilestone>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::text("message", &a.message, 1, MAX_TEXT)?;
            check::range("progress", a.progress, 0, 100)?;
            opt_task(&self.state, a.task_id)?;
            let id = append(
                &self.state,
                ReportKind::Milestone,
                a.task_id,
                json!({"message": a.message, "progress": a.progress}),
            )?;
            Ok(json!({"milestone_id": id}))
        })())
    }

    #[tool(
        description = "Read back what this run recorded: a phase summary, tasks, decisions, milestones and blockers, optionally only of one phase or agent, or since a time."
    )]
    async fn get_context(
        &self,
        Parameters(a): Parameters<GetContext>,
    ) -> Result<CallToolResult, ErrorData> {
        reply((|| {
            check::opt_text("phase", a.phase.as_deref(), 1, MAX_SHORT)?;
            check::opt_text("agent", a.agent.as_deref(), 1, MAX_SHORT)?;
            let since = a.since_ms.map(|s| s.max(0) as u64);
            let rows = self
                .state
                .reports()
                .list(&ReportFilter {
                    kinds: &[],
                    phase: a.phase.as_deref(),
                    agent: a.agent.as_deref(),
                    since_ms: since,
                })
                .map_err(store_err)?;
            let want = |p: ContextPart| a.include.as_ref().is_none_or(|i| i.contains(&p));
            let of = |k: ReportKind| -> Vec<Value> {
                rows.iter().filter(|r| r.kind == k).map(row_json).collect()
            };
            let mut out = serde_json::Map::new();
            if want(ContextPart::PhaseSummary) {
                let mut counts = serde_json::Map::new();
                for r in &rows {
                    let n = counts.entry(r.kind.as_str()).or_insert(json!(0));
                    *n = json!(n.as_u64().unwrap_or(0) + 1);
                }
                out.insert("phase_summary".into(), json!({"run": self.state.caller.run, "phase": a.phase.as_deref().unwrap_or(&self.state.caller.phase), "records": counts}));
            }
            if want(ContextPart::Tasks) {
                let tasks: Vec<Value> = rows
                    .iter()
                    .filter(|r| r.kind == ReportKind::TaskStarted)
                    .map(|t| {
                        let mut v = row_json(t);
                        v["completion"] = rows
                            .iter()
                            .find(|c| {
                                c.kind == ReportKind::TaskCompleted && c.task_id == Some(t.id)
                            })
                            .map(row_json)
                            .unwrap_or(Value::Null);
                        v
                    })
                    .collect();
                out.insert("tasks".into(), Value::Array(tasks));
            }
            if want(ContextPart::Decisions) {
                out.insert("decisions".into(), Value::Array(of(ReportKind::Decision)));
            }
            if want(ContextPart::Milestones) {
                out.insert("milestones".into(), Value::Array(of(ReportKind::Milestone)));
            }
            if want(ContextPart::Blockers) {
                let b: Vec<Value> = rows
                    .iter()
                    .filter(|r| r.kind == ReportKind::Blocker)
                    .map(row_json)
                    .collect();
                out.insert("blockers".into(), Value::Array(b));
            }
            Ok(Value::Object(out))
        })())
    }
}

/// A report as the tools show it.
pub(super) fn row_json(r: &ReportRow) -> Value {
    json!({"id": r.id, "phase": r.phase, "agent": r.agent, "attempt": r.attempt, "ts_ms": r.ts_ms,
           "task_id": r.task_id, "data": r.data})
}

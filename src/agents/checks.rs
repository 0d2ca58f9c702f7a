//! The enforcement pass of validation, which needs to know the CLIs: for
//! each (phase, agent), what its CLI can enforce of the resolved ToolSet on
//! this machine, which tools it has, and whether a judge could run what the
//! work it judges planted. The loader asks through
//! [`crate::pipeline::clis::CliChecks`], which [`Checks`] implements.

use std::ops::Range;
use std::sync::Arc;

use super::capability::{self, Reach};
use super::invocation::By;
use super::{CliFacts, adapter};
use crate::confine::Availability;
use crate::model::{AgentKind, Layer, Location, Permission, Resolved};
use crate::pipeline::clis::{CliChecks, Spans};
use crate::pipeline::diagnostic::{Diagnostic, Problem, SourceFile};
use crate::pipeline::model::{Agent, Enforcement, Phase, Pipeline};

/// The answers `agents` gives validation, for a machine whose confinement
/// is `os`.
pub struct Checks<'a> {
    os: &'a Availability,
}

impl<'a> Checks<'a> {
    pub fn new(os: &'a Availability) -> Self {
        Self { os }
    }

    /// Under `read-only`, no tool that writes unless the CLI confines writes
    /// at the operating-system level (docs/pipeline.md, "Enforcement").
    fn read_only_writes(
        &self,
        phase: &Phase,
        agent: &Agent,
        r: &Resolved,
        spans: &Spans<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        let level = r.toolset.permission;
        if level != Permission::ReadOnly
            || agent.kind.confines_writes(level)
            || self.os.is_available()
        {
            return;
        }
        let Some(tool) = r.toolset.internal.iter().find(|t| t.writes()) else {
            return;
        };
        let from_defaults = r.provenance.internal.at.is_none();
        let Some(at) = r
            .provenance
            .internal
            .at
            .as_ref()
            .or(r.provenance.permission.at.as_ref())
        else {
            return;
        };
        let source = spans.source_for(at);
        let label = if from_defaults {
            format!(
                "read-only here, but mode `{}` defaults include `{tool}`",
                phase.mode
            )
        } else {
            format!("`{tool}` writes")
        };
        out.push(
            Diagnostic::error(
                Problem::ReadOnlyWrites {
                    agent: agent.name.clone(),
                    phase: phase.name.clone(),
                    tool: tool.to_string(),
                    from_defaults,
                },
                &source,
                at.span(),
            )
            .with_label(label),
        );
    }
}

impl CliChecks for Checks<'_> {
    fn controlled_flag(
        &self,
        kind: AgentKind,
        flag: &str,
        next: Option<&str>,
    ) -> Option<&'static str> {
        kind.controlled_field(flag, next)
    }

    fn check_env(&self, kind: AgentKind, name: &str, value: &str) -> Result<(), String> {
        match kind.controlled_env_reason(name) {
            Some(why) => Err(why.to_string()),
            None => adapter(kind).check_env(name, value),
        }
    }

    fn check_model(&self, kind: AgentKind, model: &str) -> Result<(), String> {
        adapter(kind).check_model(model)
    }

    /// Consult each CLI's capability table: tools it does not have are
    /// errors; fields it cannot enforce are errors under `strict` and
    /// warnings under `best-effort` (docs/pipeline.md, "Enforcement").
    fn enforcement(&self, pipeline: &Pipeline, spans: &Spans<'_>) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let strict = pipeline.defaults.enforcement == Enforcement::Strict;
        // Every (phase, agent), then every judge as the phase it runs as.
        let judged: Vec<Phase> = pipeline
            .phases
            .iter()
            .filter_map(|p| p.judge_preview())
            .collect();
        // (phase, agent, where the agent is named, whether it judges).
        let mut items: Vec<(&Phase, &String, Option<Range<usize>>, bool)> = Vec::new();
        for (pi, phase) in pipeline.phases.iter().enumerate() {
            for (ai, name) in phase.agents.iter().enumerate() {
                items.push((phase, name, spans.agent(pi, ai), false));
            }
        }
        items.extend(judged.iter().map(|p| (p, &p.agents[0], None, true)));
        for (phase, name, at, judges) in items {
            {
                let Some(agent) = pipeline.agent(name) else {
                    continue;
                };
                let agent_span = at.unwrap_or_else(|| phase.location.span());
                let r = pipeline.resolve(phase, agent);
                // One resolution serves both checks.
                if agent.kind.is_llm() {
                    self.read_only_writes(phase, agent, &r, spans, &mut out);
                }
                let at_or_agent = |at: &Option<Location>| -> (Arc<SourceFile>, Range<usize>) {
                    match at {
                        Some(l) => (spans.source_for(l), l.span()),
                        None => (Arc::clone(spans.source), agent_span.clone()),
                    }
                };
                if !agent.kind.is_llm() {
                    // ToolSets do not apply to plain commands, except their
                    // `permission` (orch confines them by it). Any other
                    // field in `agent_tools` aimed at one, or in phase
                    // `tools` in a phase of commands only, asks for a
                    // restriction orch cannot honour; in a mixed phase the
                    // phase's tools are for its LLM agents.
                    let only_commands = phase
                        .agents
                        .iter()
                        .all(|a| pipeline.agent(a).is_none_or(|a| !a.kind.is_llm()));
                    let explicit = [
                        &r.provenance.internal,
                        &r.provenance.mcp,
                        &r.provenance.max_turns,
                    ]
                    .into_iter()
                    .find(|o| {
                        o.layer == Layer::AgentTools || (o.layer == Layer::Tools && only_commands)
                    });
                    if let Some(origin) = explicit {
                        let (source, span) = at_or_agent(&origin.at);
                        let problem = Problem::Unenforceable {
                            field: "tools",
                            agent: agent.name.clone(),
                            phase: phase.name.clone(),
                            kind: "a command agent".into(),
                            // The command adapter says why, for every field alike.
                            reason: format!(
                                "{}; only `permission` is, by confining the command",
                                adapter(agent.kind).enforcement(&r.toolset).internal.reason
                            ),
                            strict,
                        };
                        out.push(if strict {
                            Diagnostic::error(problem, &source, span)
                        } else {
                            Diagnostic::warning(problem, &source, span)
                        });
                    }
                    let mut reach = Reach::of(pipeline, &r);
                    reach.after_writer = pipeline.writer_before(phase).map(|(w, _)| w);
                    let report = capability::enforcement(agent.kind, &r.toolset, &reach, self.os);
                    if report.permission.by == By::None
                        && (r.provenance.permission.layer != Layer::Default
                            || reach.after_writer.is_some())
                    {
                        let (source, span) = at_or_agent(&r.provenance.permission.at);
                        let problem = Problem::Unenforceable {
                            field: "permission",
                            agent: agent.name.clone(),
                            phase: phase.name.clone(),
                            kind: "a command agent".into(),
                            reason: report.permission.reason.into_owned(),
                            strict,
                        };
                        out.push(if strict {
                            Diagnostic::error(problem, &source, span)
                        } else {
                            Diagnostic::warning(problem, &source, span)
                        });
                    }
                    continue;
                }
                let adapter = adapter(agent.kind);
                // A judge that may start programs after the work it judges
                // may have been written: what the work planted (a build
                // script, a test, a hook) would run in the judge's process
                // tree, with the judge's verdict tools.
                if judges
                    && let Some(tool) = adapter.starts_programs(&r.toolset, self.os.is_available())
                    && let Some((writer_phase, writer)) = pipeline
                        .writers_before(phase)
                        .find(|(w, a)| !(*w == phase.name && *a == agent.name))
                {
                    let (source, span) = at_or_agent(&r.provenance.internal.at);
                    let problem = Problem::JudgeRunsTheWork {
                        judge: agent.name.clone(),
                        phase: phase.name.clone(),
                        tool,
                        writer: format!("`{writer}` (phase `{writer_phase}`)"),
                        codex: agent.kind == AgentKind::Codex,
                        strict,
                    };
                    out.push(if strict {
                        Diagnostic::error(problem, &source, span)
                    } else {
                        Diagnostic::warning(problem, &source, span)
                    });
                }
                for tool in r.toolset.internal.iter() {
                    if !adapter.supports(tool) {
                        let (source, span) = at_or_agent(&r.provenance.internal.at);
                        out.push(Diagnostic::error(
                            Problem::UnsupportedTool {
                                tool: tool.to_string(),
                                kind: agent.kind.to_string(),
                                agent: agent.name.clone(),
                                phase: phase.name.clone(),
                            },
                            &source,
                            span,
                        ));
                    }
                }
                let report = capability::enforcement(
                    agent.kind,
                    &r.toolset,
                    &Reach::of(pipeline, &r),
                    self.os,
                );
                for (field, reason) in report.gaps() {
                    let origin = match field {
                        "internal" => &r.provenance.internal,
                        "mcp" => &r.provenance.mcp,
                        "permission" => &r.provenance.permission,
                        _ => &r.provenance.max_turns,
                    };
                    let (source, span) = at_or_agent(&origin.at);
                    let problem = Problem::Unenforceable {
                        field,
                        agent: agent.name.clone(),
                        phase: phase.name.clone(),
                        kind: agent.kind.to_string(),
                        reason: reason.to_string(),
                        strict,
                    };
                    out.push(if strict {
                        Diagnostic::error(problem, &source, span)
                    } else {
                        Diagnostic::warning(problem, &source, span)
                    });
                }
            }
        }
        out
    }
}

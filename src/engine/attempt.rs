//! One attempt of one agent, for real: its own folder, the invocation
//! assembled for it, orch's endpoints opened, its start recorded, and its
//! process supervised to the end. The scheduler asks for attempts through
//! [`Attempts`](super::scheduler::Attempts); this is the implementation
//! `orch run` uses.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::assemble::{self, Context};
use super::events::Events;
use super::keeper::Keeper;
use super::scheduler::{Attempts, Order, log_dir};
use super::supervisor::{AttemptResult, AttemptSpec, Cancel, run_attempt};
use crate::agents::invocation::By;
use crate::clock::now_ms;
use crate::mcp::Host;
use crate::pipeline::{Agent, Phase, Pipeline};
use crate::store::Record;

/// What every real attempt of a run shares.
pub(crate) struct Live {
    pub(crate) run_id: String,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) ctx: Arc<Context>,
    pub(crate) events: Events,
    /// Serves orch's tools to each attempt.
    pub(crate) host: Arc<Host>,
    /// Kills every agent's process group if orch dies (SIGKILL included).
    pub(crate) keeper: Option<Arc<Keeper>>,
    /// TERM to KILL.
    pub(crate) grace: Duration,
}

impl Attempts for Live {
    async fn run(&self, order: Order<'_>, cancel: watch::Receiver<Cancel>) -> AttemptResult {
        let Order {
            phase,
            agent,
            attempt,
            feedback,
            judging,
        } = order;
        let started = now_ms();
        // Each attempt starts in a fresh directory of its own, outside the
        // workspace, that orch alone fills (and removes after).
        let dir = self.ctx.attempt_dir(&phase.name, &agent.name);
        if let Some(k) = &self.keeper {
            k.remove_if_orch_dies(dir.path());
            k.remove_if_orch_dies(&assemble::servers_dir(dir.path()));
        }
        let slot = assemble::Slot {
            dir: dir.path(),
            run_id: &self.run_id,
            attempt,
            feedback,
            judging: judging.is_some(),
        };
        // Assembling reads the file system and asks git and PATH, and
        // making a cgroup waits for every other cgroup change of the
        // machine (a move into one waits milliseconds): blocking work, off
        // the runtime's workers, in one go.
        let (inv, tree) = crate::blocking::in_place(|| {
            (
                assemble::invocation(&self.pipeline, phase, agent, &self.ctx, &slot),
                Arc::new(crate::confine::ProcessTree::tracked()),
            )
        });
        let mut endpoints: Vec<Arc<crate::mcp::Endpoint>> = self
            .orch_endpoint(phase, agent, &slot, judging, &tree)
            .into_iter()
            .collect();
        if agent.kind.is_llm() {
            let resolved = self.pipeline.resolve(phase, agent);
            let spawns = crate::blocking::in_place(|| {
                assemble::server_spawns(
                    &self.pipeline,
                    &resolved.toolset,
                    &self.ctx,
                    &inv,
                    dir.path(),
                )
            });
            for (socket, spawn) in spawns {
                endpoints.push(Arc::new(self.host.server_endpoint(
                    spawn,
                    socket,
                    Arc::clone(&tree),
                )));
            }
        }
        // As shown: a secret the pipeline wrote in an argv is not stored.
        let argv_json = serde_json::to_string(&inv.shown_argv()).unwrap_or_default();
        let env_json = serde_json::to_string(
            &inv.shown_env()
                .into_iter()
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .unwrap_or_default();
        self.events.record(Record::AttemptStarted {
            run_id: self.run_id.clone(),
            phase: phase.name.clone(),
            agent: agent.name.clone(),
            attempt,
            argv_json,
            env_json,
            prompt_json: serde_json::to_string(&inv.prompt_tokens).unwrap_or_default(),
            started_ms: started,
        });
        let max_turns = (agent.kind.is_llm() && inv.enforcement.max_turns.by == By::Orch)
            .then(|| self.pipeline.resolve(phase, agent).toolset.max_turns);
        let spec = AttemptSpec {
            run_id: self.run_id.clone(),
            phase: phase.name.clone(),
            agent: agent.name.clone(),
            attempt,
            kind: agent.kind,
            invocation: inv,
            timeout: phase.timeout,
            stall_timeout: phase.stall_timeout,
            max_turns,
            grace: self.grace,
            keeper: self.keeper.clone(),
            log_dir: log_dir(
                &self.ctx.state_dir(),
                &self.run_id,
                &phase.name,
                &agent.name,
            ),
            tree,
            endpoints,
        };
        let result = run_attempt(spec, self.events.clone(), cancel).await;
        // The attempt's own directory goes with it (its endpoint too), and
        // the keeper forgets it.
        let path = dir.path().to_path_buf();
        drop(dir);
        if let Some(k) = &self.keeper {
            // (One orch could not remove stays the keeper's to retry.)
            for p in [path.clone(), assemble::servers_dir(&path)] {
                if std::fs::symlink_metadata(&p).is_err() {
                    k.removed(&p);
                }
            }
        }
        result
    }
}

impl Live {
    /// orch's endpoint for an attempt of `agent` in `phase`, when its ToolSet
    /// grants orch's tools: who calls (set here, never by the agent), what it
    /// may call, and for a judge the claim it judges.
    fn orch_endpoint(
        &self,
        phase: &Phase,
        agent: &Agent,
        slot: &assemble::Slot<'_>,
        judging: Option<&crate::mcp::Judging>,
        tree: &Arc<crate::confine::ProcessTree>,
    ) -> Option<Arc<crate::mcp::Endpoint>> {
        let resolved = self.pipeline.resolve(phase, agent);
        let tools = assemble::orch_tools(agent, &resolved.toolset)?;
        let ctx = &self.ctx;
        let prompt = crate::prompt::Prompts::of(
            &self.pipeline,
            phase,
            crate::prompt::Vars {
                run_id: slot.run_id,
                inputs: &ctx.inputs,
                feedback: slot.feedback,
            },
        )
        .user;
        let caller = crate::mcp::Caller {
            run: slot.run_id.to_string(),
            phase: phase.name.clone(),
            agent: agent.name.clone(),
            attempt: slot.attempt,
            workspace: ctx.workdir.clone(),
            tools,
            judging: judging.cloned(),
            prompt: Some(prompt),
            knowledge: ctx.settings.knowledge.clone(),
            marker: Some(assemble::marker_path(slot.dir)),
            state_dir: ctx.state_dir(),
        };
        Some(Arc::new(self.host.endpoint(
            caller,
            assemble::endpoint_path(slot.dir),
            Arc::clone(tree),
        )))
    }
}

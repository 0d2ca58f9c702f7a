//! orch's MCP server for one attempt: the tools of every family in one
//! router, their schemas made portable, narrowed to the attempt's scope.
//! orch serves it from its own process, through the attempt's endpoint
//! ([`super::host`]); nothing of it runs inside the agent's sandbox.
//!
//! Scope is enforced twice, by orch: a tool outside it is not listed, and
//! a call to it is a tool error (`isError: true`), whatever the CLI does.
//! The verdict tools exist only on a judge's endpoint.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};

use super::caller::{Caller, VERDICT_TOOLS};
use super::ledger::Ledger;
use super::portable::portable;
use crate::store::{Reports, StoreError};

/// The server of one agent's attempt.
#[derive(Clone)]
pub(crate) struct OrchServer {
    pub(super) state: Arc<State>,
    router: Arc<ToolRouter<OrchServer>>,
    /// Every tool orch has, granted or not (to tell "not granted" from
    /// "no such tool").
    all: Arc<BTreeSet<String>>,
}

/// What the tools share.
pub(super) struct State {
    pub(crate) reports: Reports,
    pub(crate) caller: Caller,
    /// The workspace, canonical (artifact paths are checked against it).
    pub(crate) workspace: PathBuf,
    /// Where claims and verdicts go to the engine.
    pub(crate) ledger: Arc<Ledger>,
    /// The working directory of the process at the other end (the relay
    /// the CLI started), when known: where `verify_workspace` looks by
    /// default.
    pub(crate) peer_cwd: Option<PathBuf>,
}

impl State {
    pub(super) fn reports(&self) -> &Reports {
        &self.reports
    }
}

impl OrchServer {
    /// The server for `caller`, recording through `reports` (which must
    /// report as the caller) and telling the engine through `ledger`.
    #[cfg(test)]
    pub(crate) fn new(caller: Caller, reports: Reports, ledger: Arc<Ledger>) -> OrchServer {
        OrchServer::with_peer(caller, reports, ledger, None)
    }

    /// [`OrchServer::new`], knowing where the process at the other end
    /// works.
    pub(crate) fn with_peer(
        caller: Caller,
        reports: Reports,
        ledger: Arc<Ledger>,
        peer_cwd: Option<PathBuf>,
    ) -> OrchServer {
        let workspace =
            std::fs::canonicalize(&caller.workspace).unwrap_or(caller.workspace.clone());
        let mut router = all_tools();
        let all: BTreeSet<String> = router.map.keys().map(|k| k.to_string()).collect();
        for name in &all {
            let verdict = VERDICT_TOOLS.contains(&name.as_str());
            let granted = if verdict {
                caller.judging.is_some()
            } else {
                caller
                    .tools
                    .as_ref()
                    .is_none_or(|scope| scope.iter().any(|s| s == name))
            };
            if !granted {
                router.remove_route(name);
            }
        }
        OrchServer {
            state: Arc::new(State {
                reports,
                caller,
                workspace,
                ledger,
                peer_cwd,
            }),
            router: Arc::new(router),
            all: Arc::new(all),
        }
    }
}

/// Every tool of every family, with portable schemas.
fn all_tools() -> ToolRouter<OrchServer> {
    let mut router = OrchServer::work_tools()
        + OrchServer::phase_tools()
        + OrchServer::knowledge_tools()
        + OrchServer::workspace_tools();
    for route in router.map.values_mut() {
        route.attr.input_schema = Arc::new(portable(&route.attr.input_schema));
    }
    router
}

impl ServerHandler for OrchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("orch", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "orch records what you report for phase `{}` of run `{}`: tasks, decisions, blockers, milestones, findings, learnings, and the phase's completion claim. Every record is final.",
                self.state.caller.phase, self.state.caller.run
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.router.list_all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.router.has_route(&request.name) {
            let granted: Vec<String> = self
                .router
                .list_all()
                .into_iter()
                .map(|t| t.name.to_string())
                .collect();
            let why = if VERDICT_TOOLS.contains(&request.name.as_ref()) {
                format!(
                    "tool `{}` is only for a judge: orch gives it to the judge of a phase, on the judge's own connection",
                    request.name
                )
            } else if self.all.contains(request.name.as_ref()) {
                format!(
                    "tool `{}` is not granted to agent `{}` in phase `{}`; granted here: {}. The pipeline grants it with `mcp__orch__{}` in the phase's `mcp` list",
                    request.name,
                    self.state.caller.agent,
                    self.state.caller.phase,
                    granted.join(", "),
                    request.name
                )
            } else {
                format!(
                    "orch has no tool `{}`; granted here: {}",
                    request.name,
                    granted.join(", ")
                )
            };
            return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
        }
        let name = request.name.to_string();
        let tcc = ToolCallContext::new(self, request, context);
        let mut response = self.router.call(tcc).await?;
        // Arguments that do not deserialize: rmcp says what serde says;
        // add what the tool takes, so the agent can fix the call.
        if let CallToolResponse::Complete(result) = &mut response
            && result.is_error == Some(true)
            && let Some(tool) = self.router.get(&name)
        {
            for block in result.content.iter_mut() {
                if let Some(t) = block.as_text()
                    && t.text.starts_with("failed to deserialize parameters")
                {
                    let text = format!("{}; {}", t.text, takes(&tool.input_schema));
                    *block = ContentBlock::text(text);
                }
            }
        }
        Ok(response)
    }
}

/// "`name` takes: a (string, required), b (integer), ..." from a schema.
fn takes(schema: &serde_json::Map<String, serde_json::Value>) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let fields: Vec<String> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| {
            p.iter()
                .map(|(k, v)| {
                    let ty = match (v.get("enum"), v.get("type")) {
                        (Some(e), _) => format!("one of {e}"),
                        (None, Some(t)) => t.as_str().unwrap_or("value").to_string(),
                        _ => "value".into(),
                    };
                    let req = if required.contains(&k.as_str()) {
                        ", required"
                    } else {
                        ""
                    };
                    format!("{k} ({ty}{req})")
                })
                .collect()
        })
        .unwrap_or_default();
    format!("the tool takes: {}", fields.join(", "))
}

/// A tool's reply: its JSON result as text, or an error for the agent.
pub(super) fn reply(
    result: Result<serde_json::Value, String>,
) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    })
}

/// A store error as an agent reads it.
pub(super) fn store_err(e: StoreError) -> String {
    format!("orch could not record this: {e}")
}

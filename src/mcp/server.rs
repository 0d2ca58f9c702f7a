//! orch's MCP server for one agent: the tools of every family in one
//! router, their schemas made portable, narrowed to the agent's scope,
//! and served over stdio.
//!
//! Scope is enforced twice, by orch: a tool outside it is not listed, and
//! a call to it is a tool error (`isError: true`), whatever the CLI does.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use super::args::ServeArgs;
use super::portable::portable;
use crate::store::{Reporter, Reports, StoreError};

/// The server of one agent's attempt.
pub struct OrchServer {
    pub(super) state: Arc<State>,
    router: ToolRouter<OrchServer>,
    /// Every tool orch has, granted or not (to tell "not granted" from
    /// "no such tool").
    all: BTreeSet<String>,
}

/// What the tools share.
pub struct State {
    pub reports: Mutex<Reports>,
    pub args: ServeArgs,
    /// The workspace, canonical (artifact paths are checked against it).
    pub workspace: PathBuf,
}

impl State {
    pub fn reports(&self) -> MutexGuard<'_, Reports> {
        self.reports.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl OrchServer {
    /// The server for `args`, writing through `reports`.
    pub fn new(args: ServeArgs, reports: Reports) -> OrchServer {
        let workspace = std::fs::canonicalize(&args.workspace).unwrap_or(args.workspace.clone());
        let mut router = all_tools();
        let all: BTreeSet<String> = router.map.keys().map(|k| k.to_string()).collect();
        if let Some(scope) = &args.tools {
            for name in &all {
                if !scope.iter().any(|s| s == name) {
                    router.remove_route(name);
                }
            }
        }
        OrchServer {
            state: Arc::new(State {
                reports: Mutex::new(reports),
                args,
                workspace,
            }),
            router,
            all,
        }
    }

    /// The tools this server lists (its scope), sorted.
    pub fn listed(&self) -> Vec<rmcp::model::Tool> {
        self.router.list_all()
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

/// The names of all of orch's tools, sorted (what `mcp__orch__NAME` may
/// name).
pub fn tool_names() -> &'static [String] {
    static NAMES: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let mut names: Vec<String> = all_tools().map.keys().map(|k| k.to_string()).collect();
        names.sort();
        names
    });
    &NAMES
}

impl ServerHandler for OrchServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("orch", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "orch records what you report for phase `{}` of run `{}`: tasks, decisions, blockers, milestones, findings, learnings, and the phase's completion claim. Every record is final.",
                self.state.args.phase, self.state.args.run
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
            let why = if self.all.contains(request.name.as_ref()) {
                format!(
                    "tool `{}` is not granted to agent `{}` in phase `{}`; granted here: {}. The pipeline grants it with `mcp__orch__{}` in the phase's `mcp` list",
                    request.name,
                    self.state.args.agent,
                    self.state.args.phase,
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
pub fn reply(result: Result<serde_json::Value, String>) -> Result<CallToolResult, ErrorData> {
    Ok(match result {
        Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
        Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
    })
}

/// A store error as an agent reads it.
pub fn store_err(e: StoreError) -> String {
    format!("orch could not record this: {e}")
}

/// Standard input as the server reads it: line by line on a thread of its
/// own (so nothing waits on it at exit), with any bytes that are not UTF-8
/// replaced by U+FFFD. A message with such bytes then still parses, gets
/// its answer, and the tool refuses the damaged text by name (see
/// `check::text`); rmcp alone would drop the line and leave the client
/// waiting.
fn utf8_stdin() -> Result<tokio::net::UnixStream, String> {
    use std::io::{BufRead, Write};
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("cannot make the stdin pipe: {e}"))?;
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            let mut input = std::io::stdin().lock();
            let mut out = std::io::BufWriter::new(theirs);
            let mut line = Vec::with_capacity(4096);
            loop {
                line.clear();
                match input.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let fixed = String::from_utf8_lossy(&line);
                if out.write_all(fixed.as_bytes()).is_err() || out.flush().is_err() {
                    break;
                }
            }
            // Dropping `out` closes the pipe: the server sees the end.
        })
        .map_err(|e| format!("cannot start the stdin thread: {e}"))?;
    ours.set_nonblocking(true)
        .map_err(|e| format!("cannot set up the stdin pipe: {e}"))?;
    tokio::net::UnixStream::from_std(ours).map_err(|e| format!("cannot set up the stdin pipe: {e}"))
}

/// Serve `args` on stdin/stdout until the client goes; logs go to stderr.
pub fn serve(args: ServeArgs) -> Result<(), String> {
    let reports = Reports::open(
        &args.state_dir,
        Reporter {
            run_id: args.run.clone(),
            phase: args.phase.clone(),
            agent: args.agent.clone(),
            attempt: args.attempt,
        },
    )
    .map_err(|e| e.to_string())?;
    let server = OrchServer::new(args, reports);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let running = match server.serve((utf8_stdin()?, tokio::io::stdout())).await {
            Ok(r) => r,
            // stdin closed before the handshake: the client went away.
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(format!("the MCP handshake failed: {e}")),
        };
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| format!("the server stopped: {e}"))
    })
}

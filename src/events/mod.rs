//! The normalized event every adapter parses its CLI's JSON lines into.
//!
//! Each CLI has its own stream format (agent-clis.md, "Events"); the engine,
//! the store and the live view only ever see [`Event`].

use serde::Serialize;

/// One thing that happened in an agent attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The CLI started a session; `tools` are the tool names it reports
    /// offering the model (when it says).
    SessionStart {
        session_id: Option<String>,
        model: Option<String>,
        tools: Vec<String>,
        mcp_servers: Vec<String>,
        permission_mode: Option<String>,
    },
    /// Text from the model.
    AssistantText { text: String },
    /// The model asked for a tool.
    ToolCall {
        id: Option<String>,
        name: String,
        input: serde_json::Value,
    },
    /// A tool call finished.
    ToolResult {
        id: Option<String>,
        is_error: bool,
        output: String,
    },
    /// The CLI refused a tool call because of its permission rules.
    PermissionDenied {
        tool: String,
        reason: Option<String>,
    },
    /// Tokens (and cost, when the CLI says) used so far or by one turn.
    Usage {
        tokens_in: u64,
        tokens_out: u64,
        cost_usd: Option<f64>,
    },
    /// A model turn ended.
    TurnEnd,
    /// The attempt's final result as the CLI reports it.
    Result {
        is_error: bool,
        subtype: Option<String>,
        text: Option<String>,
        num_turns: Option<u32>,
        session_id: Option<String>,
        tokens_in: Option<u64>,
        tokens_out: Option<u64>,
        cost_usd: Option<f64>,
    },
    /// An error the CLI reported; `rate_limited` when it is a rate limit,
    /// with the reset time (Unix seconds) when the CLI gives one.
    Error {
        message: String,
        rate_limited: bool,
        retry_at: Option<u64>,
    },
}

impl Event {
    /// The event's kind as stored (`session_start`, `tool_call`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Event::SessionStart { .. } => "session_start",
            Event::AssistantText { .. } => "assistant_text",
            Event::ToolCall { .. } => "tool_call",
            Event::ToolResult { .. } => "tool_result",
            Event::PermissionDenied { .. } => "permission_denied",
            Event::Usage { .. } => "usage",
            Event::TurnEnd => "turn_end",
            Event::Result { .. } => "result",
            Event::Error { .. } => "error",
        }
    }
}

/// Whether an error message looks like a rate limit.
pub fn looks_rate_limited(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("rate limit")
        || m.contains("rate_limit")
        || m.contains("429")
        || m.contains("too many requests")
        || m.contains("quota")
        || m.contains("overloaded")
}

//! The normalized event every adapter parses its CLI's JSON lines into.
//!
//! Each CLI has its own stream format (docs/agents/*.md); the engine,
//! the store and the live view only ever see [`Event`].

use serde::Serialize;

pub(crate) mod rate_limit;

/// One thing that happened in an agent attempt.
#[derive(Debug, Clone, PartialEq, Serialize, strum::IntoStaticStr)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// An error the CLI reported; `rate_limit` when it is a rate limit
    /// (with when it lifts, when the CLI says).
    Error {
        message: String,
        rate_limit: Option<RateLimit>,
    },
}

impl Event {
    /// An error with this message, read for a rate limit.
    pub fn error(message: String) -> Event {
        Event::Error {
            rate_limit: rate_limit::read(&message),
            message,
        }
    }

    /// An error the CLI itself marks as a rate limit (a 429 status, an
    /// error type), whatever its text says; the reset is `reset` when the
    /// CLI gives one beside the text, else what the text says.
    pub fn rate_limit_error(message: String, reset: Option<RateLimit>) -> Event {
        let from_text = rate_limit::read(&message).unwrap_or(RateLimit::Unknown);
        Event::Error {
            rate_limit: Some(reset.unwrap_or(from_text)),
            message,
        }
    }

    /// The event's kind as stored (`session_start`, `tool_call`, ...).
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

pub use rate_limit::RateLimit;
pub(crate) use rate_limit::looks_rate_limited;

/// How many lines of an attempt's output reports keep (JUnit, summaries).
pub(crate) const TAIL_LINES: usize = 20;

/// Longest line kept in a tail, in characters.
const TAIL_LINE_CHARS: usize = 400;

/// The readable lines a recorded event adds to an attempt's output tail:
/// the model's text, tool calls, errors, refusals and unparsed lines;
/// nothing for the rest. One rule for a live run and a stored one, so
/// their reports read the same.
pub(crate) fn readable_lines(kind: &str, data_json: &str, raw: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for_each_readable_line(kind, data_json, raw, |l| lines.push(l));
    lines
}

/// [`readable_lines`], each handed to `f` as it is made: the live view
/// follows every event of a run this way, with no list built per event
/// and an unparsed line not copied twice.
pub(crate) fn for_each_readable_line(
    kind: &str,
    data_json: &str,
    raw: &str,
    mut f: impl FnMut(String),
) {
    /// The fields the readable kinds take their line from.
    #[derive(serde::Deserialize, Default)]
    struct Fields<'a> {
        #[serde(borrow, default)]
        text: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        name: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        tool: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        message: Option<std::borrow::Cow<'a, str>>,
    }
    let data = || serde_json::from_str::<Fields<'_>>(data_json).unwrap_or_default();
    let field = |v: Option<std::borrow::Cow<'_, str>>| v.unwrap_or_default().into_owned();
    let made;
    let text: &str = match kind {
        "raw" | "stderr" => raw,
        "assistant_text" => {
            made = field(data().text);
            &made
        }
        "tool_call" => {
            made = format!("tool: {}", field(data().name));
            &made
        }
        "permission_denied" => {
            made = format!("refused: {}", field(data().tool));
            &made
        }
        "error" => {
            made = format!("error: {}", field(data().message));
            &made
        }
        _ => return,
    };
    for l in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        f(match l.char_indices().nth(TAIL_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &l[..cut]),
            None => l.to_string(),
        });
    }
}

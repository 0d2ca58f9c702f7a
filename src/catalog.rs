//! Static facts other layers look up by name, kept in one leaf so that
//! checking a pipeline file needs none of the parts that serve or run it.

/// orch's own MCP tools, sorted: the names `mcp__orch__NAME` may use. The
/// server's router is the truth; a test in `mcp` holds this list to it.
pub(crate) const ORCH_TOOLS: &[&str] = &[
    "add_comment",
    "add_finding",
    "add_learning",
    "approve_phase",
    "complete_phase",
    "complete_task",
    "create_followup",
    "get_context",
    "get_phase",
    "list_followups",
    "log_decision",
    "log_issue",
    "log_milestone",
    "query_run_events",
    "record_test_health",
    "reject_phase",
    "search_knowledge",
    "search_learnings",
    "start_task",
    "update_memory",
    "verify_workspace",
];

/// The layers of a system prompt a profile may leave out (`omit`).
pub(crate) const OMITTABLE: &[&str] = &["instructions", "learnings"];

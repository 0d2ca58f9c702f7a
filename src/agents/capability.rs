//! The capability table: who enforces each ToolSet field for each CLI, the
//! CLI's own report (from its adapter) combined with what the operating
//! system holds when orch confines the agent. Validation, `explain` and
//! `run` all read [`enforcement`]; [`markdown`] renders it for people
//! (`docs/capabilities.md`, kept current by a test).

use std::fmt::Write;
use std::sync::Arc;

use super::CliFacts;
use super::adapter::adapter;
use super::invocation::{By, Enforced, Enforcement};
use crate::confine::Availability;
use crate::model::AgentKind;
use crate::model::toolset::{InternalTool, Layer, McpTool, Permission, Resolved, ToolSet};
use crate::pipeline::Pipeline;

/// What besides the CLI's own tools acts for an agent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reach<'a> {
    /// Granted MCP servers, other than orch's own, that the pipeline does
    /// not vouch only read: they run with every right the agent has.
    pub(crate) servers: Vec<&'a str>,
    /// Those of them that are remote: they run elsewhere, so no
    /// confinement on this machine holds what their tools do.
    pub(crate) remote: Vec<&'a str>,
    /// For a command agent: whether a layer sets its `permission` (without
    /// one it runs unconfined, as written, unless `after_writer` says
    /// otherwise).
    pub(crate) permission_set: bool,
    /// A phase whose agents may write the workspace, confined, before or
    /// while this one runs: a command without a `permission` of its own is
    /// held to `workspace-write`, so that what they wrote runs with no more
    /// than their rights.
    pub(crate) after_writer: Option<&'a str>,
}

impl<'a> Reach<'a> {
    /// What acts for an agent with `resolved` tools in `pipeline`.
    pub(crate) fn of(pipeline: &'a Pipeline, resolved: &Resolved) -> Self {
        let mut servers: Vec<&'a str> = Vec::new();
        let mut remote: Vec<&'a str> = Vec::new();
        for m in resolved.toolset.mcp.iter() {
            if let Some(s) = pipeline
                .mcp_servers
                .iter()
                .find(|s| s.name == m.server && !s.read_only)
                && !servers.contains(&s.name.as_str())
            {
                servers.push(&s.name);
                if matches!(
                    s.transport,
                    crate::pipeline::model::McpTransport::Http { .. }
                ) {
                    remote.push(&s.name);
                }
            }
        }
        Reach {
            servers,
            remote,
            permission_set: resolved.provenance.permission.layer != Layer::Default,
            after_writer: None,
        }
    }
}

/// How each field of `ts` is enforced for `kind` on a machine where
/// confinement is `os`: the CLI's report, with `permission` held by the OS
/// where orch confines the agent, and not enforced where a shell or an MCP
/// server could write past the CLI's rules and nothing confines them.
pub(crate) fn enforcement(
    kind: AgentKind,
    ts: &ToolSet,
    reach: &Reach<'_>,
    os: &Availability,
) -> Enforcement {
    let mut e = adapter(kind).enforcement(ts);
    e.permission = permission(kind, ts, reach, os, e.permission);
    e
}

/// What confinement holds a level to, for `explain`.
fn confined(level: Permission, abi: u32) -> Enforced {
    let writes = match level {
        Permission::ReadOnly => "it writes nothing but its own directory",
        _ => "it writes only in the workspace and its own directory",
    };
    Enforced::os(format!(
        "Landlock (ABI {abi}) holds the agent's whole process tree (shells, interpreters, MCP servers): {writes}; the home directory is not readable"
    ))
}

fn permission(
    kind: AgentKind,
    ts: &ToolSet,
    reach: &Reach<'_>,
    os: &Availability,
    cli: Enforced,
) -> Enforced {
    let level = ts.permission;
    if kind == AgentKind::Command {
        if !reach.permission_set {
            return match (reach.after_writer, os.abi()) {
                (None, _) => cli,
                (Some(w), Some(abi)) => Enforced::os(format!(
                    "phase `{w}` may write the workspace before this command runs, so orch holds the command at workspace-write with Landlock (ABI {abi}): what an agent wrote there (a build script, a test) runs with no more than the agent's rights, and the home directory is not readable; `permission = \"full-access\"` on the command runs it with all your rights"
                )),
                (Some(w), None) => Enforced::none(format!(
                    "phase `{w}` may write the workspace before this command runs, and nothing can confine the command (OS confinement is {}): what an agent wrote there would run with all your rights; `permission = \"full-access\"` on the command says you accept that",
                    os.describe()
                )),
            };
        }
        return match (level, os.abi()) {
            (Permission::FullAccess, _) => Enforced::os("full-access: the command runs unconfined"),
            (_, Some(abi)) => confined(level, abi),
            (_, None) => Enforced::none(format!(
                "a command can do anything its user can, and nothing confines it: OS confinement is {}",
                os.describe()
            )),
        };
    }
    if level == Permission::FullAccess {
        return cli;
    }
    // A remote server's tools act on another machine (or on this one
    // through a server orch did not start): no confinement here holds them.
    if let Some(server) = reach.remote.first() {
        return Enforced::none(format!(
            "MCP server `{server}` is remote: its tools run outside the agent's process tree, where neither the CLI nor the OS confinement holds what they do; set `read_only = true` in `[mcp_servers.{server}]` if its tools only read"
        ));
    }
    if let Some(abi) = os.abi() {
        return confined(level, abi);
    }
    // Nothing confines the process tree: the CLI's rules hold only as long
    // as nothing the agent can start is able to write.
    let why = os.describe();
    if !kind.confines_writes(level)
        && let Some(shell) = ts
            .internal
            .iter()
            .find(|t| matches!(t, InternalTool::Bash | InternalTool::BashPattern(_)))
    {
        return Enforced::none(format!(
            "`{shell}` starts programs, and a program (an interpreter, a build tool, a test runner) can write anywhere; nothing confines it: OS confinement is {why}"
        ));
    }
    if let Some(server) = reach.servers.first() {
        let outside = if kind.confines_writes(Permission::ReadOnly) {
            format!(" (outside {kind}'s sandbox)")
        } else {
            String::new()
        };
        return Enforced::none(format!(
            "MCP server `{server}` runs with every right of its user{outside}, and nothing confines it: OS confinement is {why}; set `read_only = true` in `[mcp_servers.{server}]` if its tools only read"
        ));
    }
    cli
}

/// A representative ToolSet: `Read, Glob, Grep`, plus writing tools at the
/// write levels, plus a shell when given.
fn sample(permission: Permission, shell: Option<InternalTool>) -> ToolSet {
    use InternalTool::*;
    let mut internal = match permission {
        Permission::ReadOnly => vec![Read, Glob, Grep],
        _ => vec![Read, Write, Edit, Glob, Grep],
    };
    internal.extend(shell);
    ToolSet {
        internal: internal.into(),
        mcp: Arc::new([McpTool {
            server: crate::model::ORCH_MCP_SERVER.into(),
            tool: None,
        }]),
        permission,
        max_turns: 25,
    }
}

fn cell(e: &Enforced, notes: &mut Vec<String>) -> String {
    let by = match e.by {
        By::Cli => "cli",
        By::Orch => "orch",
        By::Os => "os",
        By::None => "**none**",
    };
    if let Some(i) = notes.iter().position(|n| *n == e.reason) {
        format!("{by} [{}]", i + 1)
    } else {
        notes.push(e.reason.to_string());
        format!("{by} [{}]", notes.len())
    }
}

/// The Markdown table, for both cases: confinement available (Landlock ABI
/// 7, as on the machine the docs were made on) and not.
pub(crate) fn markdown() -> String {
    let mut out = String::new();
    let mut notes: Vec<String> = Vec::new();
    out.push_str(
        "# Enforcement capabilities\n\n\
         Generated by `orch doctor --capabilities` from the code validation\n\
         consults; `tests/integration` fails when this file is stale. `cli`: the\n\
         agent CLI enforces the field; `os`: the operating system does, because\n\
         orch confines the agent's whole process tree (Landlock on Linux; see\n\
         `confinement.md`); `orch`: orch does (it counts turns in the event\n\
         stream and stops the agent); **none**: nobody can, so\n\
         `enforcement = \"strict\"` refuses it and `\"best-effort\"` warns. What\n\
         the real CLIs were seen to do is in `enforcement.md`.\n\n\
         `permission` depends on the machine: the first column is what holds\n\
         where orch can confine (`orch doctor` says whether it can), the second\n\
         what holds where it cannot (an older kernel, not Linux, or\n\
         `confinement = \"off\"`). The other fields do not depend on it.\n\n\
         Each row is a representative ToolSet: read-only is `Read, Glob, Grep`,\n\
         the write levels add `Write, Edit`; then a shell, restricted\n\
         (`Bash(<pattern>)`) or not (`Bash`), or none; `mcp` is orch's own\n\
         server (a pipeline's own servers are in the notes below the table).\n\n\
         | CLI | level | shell | internal | mcp | permission, confined | permission, not confined | max_turns |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let pattern = || Some(InternalTool::BashPattern("cargo test *".into()));
    let rows = [
        (Permission::ReadOnly, None),
        (Permission::ReadOnly, pattern()),
        (Permission::WorkspaceWrite, pattern()),
        (Permission::WorkspaceWrite, Some(InternalTool::Bash)),
        (Permission::FullAccess, Some(InternalTool::Bash)),
    ];
    let confined = Availability::Available { abi: 7 };
    let not_confined = Availability::Unavailable {
        reason: "not available here".into(),
    };
    let reach = Reach::default();
    for kind in AgentKind::ALL.iter().copied().filter(|k| k.is_llm()) {
        for (level, shell) in &rows {
            let ts = sample(*level, shell.clone());
            let on = enforcement(kind, &ts, &reach, &confined);
            let off = enforcement(kind, &ts, &reach, &not_confined);
            let shell = match shell {
                None => "none".to_string(),
                Some(s) => format!("`{s}`"),
            };
            let _ = writeln!(
                out,
                "| {kind} | {level} | {shell} | {} | {} | {} | {} | {} |",
                cell(&on.internal, &mut notes),
                cell(&on.mcp, &mut notes),
                cell(&on.permission, &mut notes),
                cell(&off.permission, &mut notes),
                cell(&on.max_turns, &mut notes),
            );
        }
    }
    out.push_str("\n## A pipeline's own MCP servers\n\n");
    let servers = Reach {
        servers: vec!["fs"],
        remote: Vec::new(),
        permission_set: false,
        after_writer: None,
    };
    let ts = sample(Permission::ReadOnly, None);
    for kind in [AgentKind::Claude, AgentKind::Codex] {
        let off = enforcement(kind, &ts, &servers, &not_confined);
        let _ = writeln!(
            out,
            "- {kind}, read-only, granting a tool of stdio server `fs`: confined {}; not confined {}.",
            cell(
                &enforcement(kind, &ts, &servers, &confined).permission,
                &mut notes
            ),
            cell(&off.permission, &mut notes),
        );
    }
    let remote = Reach {
        servers: vec!["search"],
        remote: vec!["search"],
        permission_set: false,
        after_writer: None,
    };
    let _ = writeln!(
        out,
        "- any CLI, read-only, granting a tool of remote server `search` (`url`): confined {}; not confined {}.",
        cell(
            &enforcement(AgentKind::Claude, &ts, &remote, &confined).permission,
            &mut notes
        ),
        cell(
            &enforcement(AgentKind::Claude, &ts, &remote, &not_confined).permission,
            &mut notes
        ),
    );
    out.push_str(
        "\nA server the pipeline marks `read_only = true` counts as reading only; \
         orch takes the pipeline's word for it.\n",
    );
    out.push_str("\n## Plain commands\n\nToolSets do not apply to `kind = \"command\"` agents, except `permission`:\n\n");
    let cmd = |level| sample(level, None);
    let set = Reach {
        servers: Vec::new(),
        remote: Vec::new(),
        permission_set: true,
        after_writer: None,
    };
    for level in [Permission::ReadOnly, Permission::WorkspaceWrite] {
        let _ = writeln!(
            out,
            "- `permission = \"{level}\"`: confined {}; not confined {}.",
            cell(
                &enforcement(AgentKind::Command, &cmd(level), &set, &confined).permission,
                &mut notes
            ),
            cell(
                &enforcement(AgentKind::Command, &cmd(level), &set, &not_confined).permission,
                &mut notes
            ),
        );
    }
    let _ = writeln!(
        out,
        "- no `permission` set: {} (the command runs as written, unconfined).",
        cell(
            &enforcement(
                AgentKind::Command,
                &cmd(Permission::ReadOnly),
                &Reach::default(),
                &confined
            )
            .permission,
            &mut notes
        ),
    );
    out.push_str("\n## Tools each CLI lacks\n\n");
    out.push_str("A ToolSet naming one of these for that CLI is a validation error.\n\n");
    let all = [
        InternalTool::Read,
        InternalTool::Write,
        InternalTool::Edit,
        InternalTool::Glob,
        InternalTool::Grep,
        InternalTool::Bash,
        InternalTool::WebFetch,
        InternalTool::WebSearch,
        InternalTool::Agent,
        InternalTool::TodoWrite,
        InternalTool::NotebookEdit,
    ];
    for kind in AgentKind::ALL.iter().copied().filter(|k| k.is_llm()) {
        let missing: Vec<String> = all
            .iter()
            .filter(|t| !adapter(kind).supports(t))
            .map(|t| format!("`{t}`"))
            .collect();
        let _ = writeln!(
            out,
            "- {kind}: {}",
            if missing.is_empty() {
                "none".to_string()
            } else {
                missing.join(", ")
            }
        );
    }
    out.push_str("\n## Notes\n\n");
    for (i, n) in notes.iter().enumerate() {
        let _ = writeln!(out, "{}. {n}", i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(level: Permission, internal: Vec<InternalTool>) -> ToolSet {
        ToolSet {
            internal: internal.into(),
            mcp: Arc::new([]),
            permission: level,
            max_turns: 5,
        }
    }

    #[test]
    fn the_os_holds_permission_wherever_it_confines() {
        let os = Availability::Available { abi: 7 };
        let pattern = InternalTool::BashPattern("python3 *".into());
        for kind in AgentKind::ALL.iter().copied().filter(|k| k.is_llm()) {
            for (level, tools) in [
                (
                    Permission::ReadOnly,
                    vec![InternalTool::Read, pattern.clone()],
                ),
                (
                    Permission::ReadOnly,
                    vec![InternalTool::Read, InternalTool::Bash],
                ),
                (
                    Permission::WorkspaceWrite,
                    vec![InternalTool::Write, InternalTool::Edit, InternalTool::Bash],
                ),
            ] {
                let e = enforcement(kind, &ts(level, tools), &Reach::default(), &os);
                assert_eq!(
                    e.permission.by,
                    By::Os,
                    "{kind} {level}: {}",
                    e.permission.reason
                );
            }
            // full-access is not confined: the CLI's word stands.
            let e = enforcement(
                kind,
                &ts(Permission::FullAccess, vec![InternalTool::Bash]),
                &Reach::default(),
                &os,
            );
            assert_eq!(e.permission.by, By::Cli);
        }
    }

    /// A pattern is held only where the CLI can match it: Gemini and
    /// Copilot match a command by prefix (a `*` inside would widen to the
    /// prefix before it), Codex not at all; Claude and OpenCode match
    /// wildcards anywhere.
    #[test]
    fn a_command_pattern_only_where_the_cli_can_match_it() {
        let os = Availability::Available { abi: 7 };
        let with = |p: &str| {
            ts(
                Permission::ReadOnly,
                vec![InternalTool::Read, InternalTool::BashPattern(p.into())],
            )
        };
        for kind in AgentKind::ALL.iter().copied().filter(|k| k.is_llm()) {
            let inner = enforcement(kind, &with("git * --oneline"), &Reach::default(), &os);
            let trailing = enforcement(kind, &with("git log *"), &Reach::default(), &os);
            let exact = enforcement(kind, &with("git status"), &Reach::default(), &os);
            match kind {
                AgentKind::Gemini | AgentKind::Copilot => {
                    assert_eq!(inner.internal.by, By::None, "{kind}");
                    assert!(inner.internal.reason.contains("git * --oneline"), "{kind}");
                    assert_eq!(exact.internal.by, By::None, "{kind}");
                    assert_eq!(trailing.internal.by, By::Cli, "{kind}");
                }
                AgentKind::Codex => {
                    assert_eq!(inner.internal.by, By::None);
                    assert_eq!(trailing.internal.by, By::None);
                }
                _ => {
                    assert_eq!(inner.internal.by, By::Cli, "{kind}");
                    assert_eq!(trailing.internal.by, By::Cli, "{kind}");
                }
            }
        }
    }

    #[test]
    fn without_confinement_a_command_pattern_is_no_write_boundary() {
        let off = Availability::Off;
        let pattern = InternalTool::BashPattern("python3 *".into());
        for kind in [
            AgentKind::Claude,
            AgentKind::Gemini,
            AgentKind::Opencode,
            AgentKind::Copilot,
        ] {
            let e = enforcement(
                kind,
                &ts(
                    Permission::ReadOnly,
                    vec![InternalTool::Read, pattern.clone()],
                ),
                &Reach::default(),
                &off,
            );
            assert_eq!(e.permission.by, By::None, "{kind}");
            assert!(e.permission.reason.contains("Bash(python3 *)"));
            assert!(
                e.permission.reason.contains("confinement = \"off\""),
                "{}",
                e.permission.reason
            );
            // No shell: the CLI's rules are the whole story.
            let e = enforcement(
                kind,
                &ts(Permission::ReadOnly, vec![InternalTool::Read]),
                &Reach::default(),
                &off,
            );
            assert_eq!(e.permission.by, By::Cli, "{kind}");
        }
        // Codex's own sandbox still holds its shell.
        let e = enforcement(
            AgentKind::Codex,
            &ts(Permission::ReadOnly, vec![InternalTool::Read, pattern]),
            &Reach::default(),
            &off,
        );
        assert_eq!(e.permission.by, By::Cli);
    }

    #[test]
    fn an_unconfined_mcp_server_is_a_way_around_the_permission() {
        let off = Availability::Unavailable {
            reason: "old kernel".into(),
        };
        let reach = Reach {
            servers: vec!["sh"],
            remote: Vec::new(),
            permission_set: false,
            after_writer: None,
        };
        for kind in AgentKind::ALL.iter().copied().filter(|k| k.is_llm()) {
            let e = enforcement(
                kind,
                &ts(Permission::ReadOnly, vec![InternalTool::Read]),
                &reach,
                &off,
            );
            assert_eq!(e.permission.by, By::None, "{kind}");
            assert!(e.permission.reason.contains("read_only = true"));
            let e = enforcement(
                kind,
                &ts(Permission::ReadOnly, vec![InternalTool::Read]),
                &reach,
                &Availability::Available { abi: 4 },
            );
            assert_eq!(e.permission.by, By::Os, "{kind}");
            // A remote server: confinement here does not hold it.
            let remote = Reach {
                servers: vec!["search"],
                remote: vec!["search"],
                permission_set: false,
                after_writer: None,
            };
            let e = enforcement(
                kind,
                &ts(Permission::ReadOnly, vec![InternalTool::Read]),
                &remote,
                &Availability::Available { abi: 4 },
            );
            assert_eq!(e.permission.by, By::None, "{kind}");
            assert!(
                e.permission.reason.contains("is remote"),
                "{}",
                e.permission.reason
            );
        }
    }

    #[test]
    fn commands_are_confined_only_when_a_permission_is_set() {
        let os = Availability::Available { abi: 7 };
        let read_only = ts(Permission::ReadOnly, Vec::new());
        let set = Reach {
            servers: Vec::new(),
            remote: Vec::new(),
            permission_set: true,
            after_writer: None,
        };
        assert_eq!(
            enforcement(AgentKind::Command, &read_only, &set, &os)
                .permission
                .by,
            By::Os
        );
        assert_eq!(
            enforcement(AgentKind::Command, &read_only, &set, &Availability::Off)
                .permission
                .by,
            By::None
        );
        assert_eq!(
            enforcement(AgentKind::Command, &read_only, &Reach::default(), &os)
                .permission
                .by,
            By::None,
            "without a permission the command is not confined (and says so)"
        );
    }
}

//! `orch explain FILE`: for every (phase, agent), the resolved ToolSet and
//! where each field came from.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use std::collections::BTreeMap;

use super::GlobalArgs;
use super::error::CliError;
use super::load::load_pipeline;
use super::output::{Exit, Format, phase_index, stdout, write_json};
use crate::agents::invocation::{Invocation, InvocationFile, Stdin};
use crate::agents::{By, Enforcement};
use crate::confine::{Availability, Confinement};
use crate::engine::assemble;
use crate::model::suggest;
use crate::model::toolset::{Layer, Origin, Permission, Resolved};
use crate::pipeline::model::{McpServer, McpTransport};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: `pipeline.toml` here, else the only
    /// file in `pipelines/` or `.orch/pipelines/`)
    #[arg(value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    /// Only this phase
    #[arg(long, value_name = "PHASE")]
    pub(crate) phase: Option<String>,
    /// Only this agent
    #[arg(long, value_name = "AGENT")]
    pub(crate) agent: Option<String>,
    /// A value for `{{inputs.NAME}}` (repeatable), as `orch run` takes it
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = super::run::parse_input)]
    pub(crate) inputs: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Serialize)]
struct ExplainJson<'a> {
    pipeline: &'a str,
    /// Whether orch can confine agents on this machine.
    confinement: &'a Availability,
    /// The MCP servers (other than orch's own) the invocations below are
    /// given, and where each was declared.
    mcp_servers: Vec<ServerJson>,
    /// What only a run knows, written in its place below: replace these
    /// texts (in `argv`, `env`, `cwd`, `stdin` and `files`) with the
    /// attempt's directory and the run id to get what `orch run` starts.
    placeholders: Placeholders,
    invocations: Vec<InvocationJson<'a>>,
}

#[derive(Serialize)]
struct Placeholders {
    /// The end of each invocation's `dir`
    /// (`<attempts>/<phase>-<agent>-XXXXXXXXXXXXXXXX`): a run puts the
    /// attempt's 16 random hex digits in its place.
    attempt_id: &'static str,
    run_id: &'static str,
}

#[derive(Serialize)]
struct ServerJson {
    name: String,
    /// `pipeline.toml:12:1` or `./.mcp.json`.
    source: String,
    /// `stdio` or `http`.
    transport: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// Header names with their templates (a literal value is a secret and
    /// is not shown).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    headers: BTreeMap<String, String>,
    /// A stdio server's own environment, which orch starts it with (and
    /// which the agent never gets): `${NAME}` as written, secrets redacted.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    read_only: bool,
}

impl ServerJson {
    fn of(s: &McpServer) -> Self {
        let mut env = BTreeMap::new();
        let (transport, command, url, headers) = match &s.transport {
            McpTransport::Stdio { command, env: own } => {
                for (k, v) in own {
                    let var = crate::agents::invocation::EnvVar {
                        name: k.clone(),
                        value: crate::agents::env::classify(k, v),
                    };
                    env.insert(k.clone(), var.shown());
                }
                (
                    "stdio",
                    // Secrets in it redacted, as in the invocations' argvs.
                    Some(crate::agents::env::shown_argv(command)),
                    None,
                    BTreeMap::new(),
                )
            }
            McpTransport::Http { url, headers } => (
                "http",
                None,
                Some(url.clone()),
                headers
                    .iter()
                    .map(|(h, v)| {
                        let shown = if v.contains("${") {
                            v.clone()
                        } else {
                            "<secret>".into()
                        };
                        (h.clone(), shown)
                    })
                    .collect(),
            ),
        };
        ServerJson {
            name: s.name.clone(),
            source: s.source.to_string(),
            transport,
            command,
            url,
            headers,
            env,
            read_only: s.read_only,
        }
    }

    /// `stdio: npx -y x` or `http: https://...`.
    fn reach(&self) -> String {
        match (&self.command, &self.url) {
            (Some(c), _) => format!("stdio: {}", c.join(" ")),
            (_, Some(u)) => format!("http: {u}"),
            _ => String::new(),
        }
    }
}

#[derive(Serialize)]
struct InvocationJson<'a> {
    phase: &'a str,
    agent: &'a str,
    kind: &'a str,
    mode: &'a str,
    /// The phase's judge (its prompt is written once the artifact is).
    judge: bool,
    #[serde(flatten)]
    resolved: Resolved,
    /// The model and the layer it came from.
    model: assemble::ModelChoice,
    argv: Vec<String>,
    /// The working directory.
    cwd: PathBuf,
    /// What the process reads on standard input (the prompt, for the CLIs
    /// that take it there), or `null`: nothing (`/dev/null`).
    stdin: Option<String>,
    /// The attempt's own directory (see `placeholders.attempt_id`).
    dir: PathBuf,
    /// The whole environment of the process, secrets redacted; `${NAME}`
    /// is NAME from orch's environment (left out when orch has none).
    env: BTreeMap<String, String>,
    /// `true` for plain commands, which also inherit orch's environment.
    inherit_env: bool,
    files: Vec<InvocationFile>,
    /// The shells orch gives a confined CLI (`null`: none): orch's program
    /// under their names, which puts each command in a Landlock domain
    /// below the CLI's.
    shells: Option<ShellsJson>,
    enforcement: Enforcement,
    /// The OS confinement of the process tree (`null`: not confined).
    confinement: Option<Confinement>,
    #[serde(skip)]
    shell: String,
    #[serde(skip)]
    unconfined_because: String,
    /// For a command without a `permission`: the phase whose agents may
    /// write the workspace before it runs (orch then holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    held_after: Option<String>,
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let (mut ctx, pipeline) = load_pipeline(global, args.file.as_deref(), color)?;
    ctx.inputs = args.inputs.iter().cloned().collect();
    let p = &pipeline;
    if let Some(name) = &args.phase {
        phase_index(p, name)?;
    }
    if let Some(agent) = &args.agent {
        let in_scope = |a: &String| {
            args.phase
                .as_ref()
                .is_none_or(|ph| p.phase(ph).is_some_and(|ph| ph.agents.contains(a)))
        };
        if !p
            .agents
            .iter()
            .any(|a| a.name == *agent && in_scope(&a.name))
        {
            let scope: Vec<&str> = p
                .agents
                .iter()
                .filter(|a| in_scope(&a.name))
                .map(|a| a.name.as_str())
                .collect();
            let hint = suggest(agent, scope.iter().copied()).map_or_else(
                || format!("agents here: {}", scope.join(", ")),
                |s| format!("did you mean `{s}`?"),
            );
            let place = args
                .phase
                .as_ref()
                .map_or(String::new(), |ph| format!(" in phase `{ph}`"));
            return Err(CliError::usage(format!("no agent `{agent}`{place}")).with_hint(hint));
        }
    }
    let judged: Vec<crate::pipeline::Phase> = p
        .phases
        .iter()
        .filter_map(|ph| ph.judge_preview())
        .collect();
    let judges = judged
        .iter()
        .filter_map(|ph| p.agent(&ph.agents[0]).map(|a| (ph, a, true)));
    let invocations: Vec<InvocationJson> = p
        .invocations()
        .map(|(ph, a)| (ph, a, false))
        .chain(judges)
        .filter(|(ph, a, _)| {
            args.phase.as_ref().is_none_or(|n| *n == ph.name)
                && args.agent.as_ref().is_none_or(|n| *n == a.name)
        })
        .map(|(ph, a, judge)| {
            let dir = ctx.planned_dir(&ph.name, &a.name);
            let inv = assemble::invocation(p, ph, a, &ctx, &assemble::Slot::preview(&dir));
            let resolved = p.resolve(ph, a);
            InvocationJson {
                phase: &ph.name,
                agent: &a.name,
                kind: a.kind.as_str(),
                mode: ph.mode.as_str(),
                judge,
                resolved: resolved.clone(),
                model: assemble::model(ph, a, &ctx.settings),
                argv: inv.shown_argv(),
                cwd: inv.cwd.clone(),
                stdin: match &inv.stdin {
                    Stdin::Null => None,
                    Stdin::Text(t) => Some(t.clone()),
                },
                dir: inv.dir.clone(),
                env: inv.shown_env().into_iter().collect(),
                inherit_env: inv.inherit_env,
                shell: inv.shell_line(),
                files: inv.shown_files(),
                shells: inv.shells.as_ref().map(|s| ShellsJson::of(s, &inv)),
                enforcement: inv.enforcement,
                held_after: (!a.kind.is_llm()
                    && resolved.provenance.permission.layer == Layer::Default)
                    .then(|| p.writer_before(ph).map(|(w, _)| w.to_string()))
                    .flatten(),
                unconfined_because: if a.kind.is_llm()
                    || resolved.provenance.permission.layer != Layer::Default
                    || p.writer_before(ph).is_some()
                {
                    if resolved.toolset.permission == Permission::FullAccess {
                        "full-access".into()
                    } else {
                        ctx.confinement.describe()
                    }
                } else {
                    "a plain command without a `permission` runs as written".into()
                },
                confinement: inv.confinement,
            }
        })
        .collect();
    let servers: Vec<ServerJson> = p
        .mcp_servers
        .iter()
        .filter(|s| {
            invocations
                .iter()
                .any(|i| i.resolved.toolset.mcp.iter().any(|m| m.server == s.name))
        })
        .map(ServerJson::of)
        .collect();
    match args.format {
        Format::Json => write_json(&ExplainJson {
            pipeline: &p.name,
            confinement: &ctx.confinement,
            mcp_servers: servers,
            placeholders: Placeholders {
                attempt_id: assemble::PREVIEW_ATTEMPT_ID,
                run_id: assemble::PREVIEW_RUN,
            },
            invocations,
        })?,
        Format::Text => text(&servers, &invocations, ctx.home.as_deref())?,
    }
    Ok(Exit::Success)
}

fn text(
    servers: &[ServerJson],
    invocations: &[InvocationJson],
    home: Option<&std::path::Path>,
) -> std::io::Result<()> {
    let mut out = stdout();
    if !servers.is_empty() {
        writeln!(out, "MCP servers")?;
        for s in servers {
            let vouched = if s.read_only { ", read_only" } else { "" };
            writeln!(
                out,
                "  {}  {}  (from {}{vouched})",
                s.name,
                s.reach(),
                s.source
            )?;
            if s.transport == "stdio" {
                let env: Vec<String> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                writeln!(
                    out,
                    "    started by orch for each agent granted it, confined as the agent, with {}; the CLI reaches it through `orch mcp relay`",
                    if env.is_empty() {
                        "no environment of its own".to_string()
                    } else {
                        format!("its own environment: {}", env.join(" "))
                    }
                )?;
            }
        }
        writeln!(out)?;
    }
    for (n, inv) in invocations.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        let role = if inv.judge { "judge, " } else { "" };
        writeln!(
            out,
            "{} / {}  ({role}kind {}, mode {})",
            inv.phase, inv.agent, inv.kind, inv.mode
        )?;
        let ts = &inv.resolved.toolset;
        let pr = &inv.resolved.provenance;
        let enf = &inv.enforcement;
        let list = |v: Vec<String>| {
            if v.is_empty() {
                "(none)".to_string()
            } else {
                v.join(", ")
            }
        };
        let rows = [
            (
                "internal",
                list(ts.internal.iter().map(|t| t.to_string()).collect()),
                &pr.internal,
                &enf.internal,
            ),
            (
                "mcp",
                list(ts.mcp.iter().map(|t| t.to_string()).collect()),
                &pr.mcp,
                &enf.mcp,
            ),
            (
                "permission",
                ts.permission.to_string(),
                &pr.permission,
                &enf.permission,
            ),
            (
                "max_turns",
                ts.max_turns.to_string(),
                &pr.max_turns,
                &enf.max_turns,
            ),
        ];
        let command = inv.kind == "command";
        // A command shows only its permission: when a layer sets it, or when
        // orch holds it after agents that may write the workspace.
        let held = inv.held_after.is_some();
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|r| !command || (r.0 == "permission" && (r.2.layer != Layer::Default || held)))
            .map(|mut r| {
                if held {
                    r.1 = Permission::WorkspaceWrite.to_string();
                }
                r
            })
            .collect();
        let vw = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
        let origin_of = |field: &str, origin: &Origin| match &inv.held_after {
            Some(w) if field == "permission" => format!("after phase `{w}`"),
            _ => origin_text(origin),
        };
        let ow = rows
            .iter()
            .map(|r| origin_of(r.0, r.2).len())
            .max()
            .unwrap_or(0);
        for (field, value, origin, e) in &rows {
            writeln!(
                out,
                "  {field:<10}  {value:<vw$}  {:<ow$}  enforced by {}",
                origin_of(field, origin),
                e.by
            )?;
        }
        if command && rows.is_empty() {
            writeln!(out, "  (a plain command: ToolSets do not apply)")?;
        }
        if !command {
            let m = &inv.model;
            let line = format!(
                "  {:<10}  {:<vw$}  {}",
                "model",
                m.value.as_deref().unwrap_or("(the CLI's default)"),
                match &m.at {
                    Some(at) => format!("{:<11} {at}", m.layer),
                    None => m.layer.to_string(),
                }
            );
            writeln!(out, "{}", line.trim_end())?;
        }
        for (field, _, _, e) in &rows {
            match e.by {
                By::Cli => {}
                By::Orch => writeln!(out, "  {field}: enforced by orch: {}", e.reason)?,
                By::Os => writeln!(out, "  {field}: enforced by os: {}", e.reason)?,
                By::None => writeln!(out, "  {field}: NOT ENFORCED: {}", e.reason)?,
            }
        }
        match &inv.confinement {
            Some(c) => confinement_text(&mut out, c, home)?,
            None => writeln!(out, "  not confined: {}", inv.unconfined_because)?,
        }
        writeln!(out, "  $ {}", inv.shell)?;
        if inv.confinement.is_some() {
            writeln!(
                out,
                "    (as a shell line it runs unconfined; orch confines the process it starts)"
            )?;
        }
        if let Some(prompt) = &inv.stdin {
            writeln!(
                out,
                "    (PROMPT: the task on standard input, {} bytes: `orch prompt` shows it, `--format json` has it as `stdin`)",
                prompt.len()
            )?;
        }
        for f in &inv.files {
            writeln!(out, "  writes {} first", f.path.display())?;
        }
        if let Some(shells) = &inv.shells {
            let made = match (&shells.program, &shells.error) {
                (Some(p), _) => format!(
                    "hard links to orch's program (linked for the run at {})",
                    p.display()
                ),
                (None, e) => format!(
                    "cannot be made ({}: the agent does not start)",
                    e.as_deref().unwrap_or("no program")
                ),
            };
            writeln!(
                out,
                "  makes {} in {} first, {made}: the CLI's shell, which runs each command in a Landlock domain below the CLI's",
                shells.names.join(", "),
                shells.folder.display(),
            )?;
            if !shells.path_left_out.is_empty() {
                let dirs: Vec<String> = shells
                    .path_left_out
                    .iter()
                    .map(|d| match d.as_os_str().is_empty() {
                        true => "an empty entry (the working directory)".to_string(),
                        false => format!("`{}`", d.display()),
                    })
                    .collect();
                writeln!(
                    out,
                    "  leaves {} out of the CLI's PATH (relative, or where the agent may write: a program planted there would run in the CLI's domain); its commands get them back",
                    dirs.join(", ")
                )?;
            }
        }
    }
    out.flush()
}

/// The shells of a confined CLI, as shown.
#[derive(Serialize)]
struct ShellsJson {
    /// The folder first on the CLI's `PATH`.
    folder: PathBuf,
    names: &'static [&'static str],
    /// The run's own file of orch's program, which each name is a hard
    /// link to (`null`: none, see `error`).
    program: Option<PathBuf>,
    /// Why there is no program (the agent cannot start).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The folders of the agent's `PATH` (as orch's environment fills it
    /// now) left out of the CLI's: relative ones and those the agent may
    /// write. The CLI's commands get them back.
    path_left_out: Vec<PathBuf>,
}

impl ShellsJson {
    fn of(s: &crate::agents::invocation::Shells, inv: &Invocation) -> Self {
        Self {
            folder: s.folder.clone(),
            names: crate::confine::shell::NAMES,
            program: s.program.as_ref().ok().map(|p| p.path().to_path_buf()),
            error: s.program.as_ref().err().cloned(),
            path_left_out: inv.cli_path_left_out(|n| std::env::var(n).ok()),
        }
    }
}

/// The paths a confined invocation may write and may not read.
fn confinement_text(
    out: &mut impl Write,
    c: &Confinement,
    home: Option<&std::path::Path>,
) -> std::io::Result<()> {
    let paths = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    writeln!(out, "  confined (Landlock ABI {}):", c.abi)?;
    writeln!(out, "    may write    {}", paths(&c.policy.writable))?;
    writeln!(out, "    and devices  {}", paths(&c.policy.devices))?;
    if !c.policy.hidden.is_empty() {
        // The exceptions that exist here, relative to the home.
        let except: Vec<String> = c
            .policy
            .readable
            .iter()
            .filter(|p| p.exists())
            .map(|p| match home.and_then(|h| p.strip_prefix(h).ok()) {
                Some(rel) => format!("~/{}", rel.display()),
                None => p.display().to_string(),
            })
            .collect();
        writeln!(out, "    cannot read  {}", paths(&c.policy.hidden))?;
        if !except.is_empty() {
            writeln!(out, "      except     {}", except.join(", "))?;
        }
    }
    Ok(())
}

fn origin_text(o: &Origin) -> String {
    match &o.at {
        Some(at) => format!("{:<11} {at}", o.layer.as_str()),
        None => o.layer.as_str().to_string(),
    }
}

//! `orch init [DIR] [--agents LIST] [--settings]`: a starting point. Writes
//! a commented `pipeline.toml` (an audit phase, then a fix phase, for the
//! chosen agent CLIs) and the JSON Schema editors check it against; with
//! `--settings`, a commented `orch.toml` too. The pipeline is validated
//! for this machine before anything is written (strict enforcement: a
//! starter that this machine cannot enforce is refused, not softened), and
//! nothing that exists is overwritten.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::GlobalArgs;
use super::error::CliError;
use super::output::{Exit, print_diagnostics};
use crate::agents::CliFacts;
use crate::engine::assemble;
use crate::model::AgentKind;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where to write (created when missing)
    #[arg(value_name = "DIR", default_value = ".")]
    pub(crate) dir: PathBuf,
    /// The agent CLIs, comma-separated (claude, codex, gemini, opencode,
    /// copilot); default: those installed here, else claude
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub(crate) agents: Vec<String>,
    /// Also write a commented `orch.toml` (project settings)
    #[arg(long)]
    pub(crate) settings: bool,
}

/// Where the schema goes, relative to DIR (`#:schema` names it).
const SCHEMA: &str = ".orch/pipeline.schema.json";

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let ctx = super::config::context(global)?;
    let (kinds, detected) = chosen(&args.agents, &ctx.settings)?;
    // What this machine can enforce decides the starter: with Bash where
    // the OS confines it, without where it cannot, refused when even that
    // is not enforced (strict enforcement is never softened here).
    let base = if args.dir.is_absolute() {
        args.dir.clone()
    } else {
        std::env::current_dir()?.join(&args.dir)
    };
    let valid = |text: &String| {
        crate::pipeline::load_str(
            "pipeline.toml",
            text.clone(),
            &base,
            &crate::agents::checks::Checks::new(&ctx.confinement),
        )
    };
    let confined = ctx.confinement.is_available();
    let mut pipeline = pipeline_text(&kinds, true, confined);
    let mut bash = true;
    if valid(&pipeline).is_err() {
        pipeline = pipeline_text(&kinds, false, confined);
        bash = false;
        if let Err(invalid) = valid(&pipeline) {
            print_diagnostics(&invalid.diagnostics, color);
            return Err(CliError::usage(
                "this machine cannot enforce the starter pipeline's tools, so nothing was written",
            )
            .with_hint(format!(
                "`orch doctor` shows what it can enforce here ({})",
                ctx.confinement.describe()
            )));
        }
    }
    let mut files: Vec<(PathBuf, String)> = vec![
        (PathBuf::from("pipeline.toml"), pipeline.clone()),
        (
            PathBuf::from(SCHEMA),
            crate::pipeline::schema::pipeline_schema(),
        ),
    ];
    if args.settings {
        files.push((PathBuf::from("orch.toml"), SETTINGS.to_string()));
    }
    for (rel, _) in &files {
        let path = args.dir.join(rel);
        if path.symlink_metadata().is_ok() {
            return Err(CliError::usage(format!(
                "`{}` exists; orch init does not overwrite",
                path.display()
            ))
            .with_hint("move it away, or init in another folder: `orch init DIR`"));
        }
        // Every folder on the way must be a folder (or not there yet), so
        // nothing fails half-way through.
        if let Some(blocked) = path
            .ancestors()
            .skip(1)
            .find(|a| a.symlink_metadata().is_ok() && !a.is_dir())
        {
            return Err(CliError::usage(format!(
                "`{}` is not a folder, so `{}` cannot be written",
                blocked.display(),
                path.display()
            ))
            .with_hint("move it away, or init in another folder: `orch init DIR`"));
        }
    }
    let mut written: Vec<PathBuf> = Vec::new();
    for (rel, text) in &files {
        let path = args.dir.join(rel);
        // create_new: a file that appeared since the check is not replaced.
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
            })
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = result {
            // All or nothing: take back what this run wrote.
            for w in &written {
                let _ = std::fs::remove_file(w);
            }
            return Err(CliError::usage(format!(
                "cannot write `{}`: {e}",
                path.display()
            )));
        }
        written.push(path);
    }
    next_steps(args, &kinds, detected, bash)?;
    Ok(Exit::Success)
}

/// The kinds asked for, or those installed (`true`: detected).
fn chosen(
    asked: &[String],
    settings: &crate::settings::Settings,
) -> Result<(Vec<AgentKind>, bool), CliError> {
    let llm: Vec<AgentKind> = AgentKind::ALL
        .iter()
        .copied()
        .filter(|k| k.is_llm())
        .collect();
    let names = || {
        llm.iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if asked.is_empty() {
        let found: Vec<AgentKind> = llm
            .iter()
            .copied()
            .filter(|k| which::which(assemble::kind_program(*k, settings)).is_ok())
            .collect();
        return Ok(if found.is_empty() {
            (vec![AgentKind::Claude], false)
        } else {
            (found, true)
        });
    }
    let mut kinds = Vec::new();
    for name in asked.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        match AgentKind::parse(name).filter(|k| k.is_llm()) {
            Some(k) if !kinds.contains(&k) => kinds.push(k),
            Some(_) => {}
            None => {
                return Err(
                    CliError::usage(format!("`{name}` is not an agent CLI orch runs"))
                        .with_hint(format!("choose from: {}", names())),
                );
            }
        }
    }
    if kinds.is_empty() {
        return Err(CliError::usage("--agents names no agent")
            .with_hint(format!("choose from: {}", names())));
    }
    Ok((kinds, false))
}

/// The starter: every chosen agent audits side by side (read-only); the
/// first one then fixes what they found (it may write the workspace).
/// `bash`: the fixer may run commands; `confined`: the OS confines agents
/// here (the comments say who holds what, so they must be true).
fn pipeline_text(kinds: &[AgentKind], bash: bool, confined: bool) -> String {
    let list = |ks: &[AgentKind]| {
        ks.iter()
            .map(|k| format!("\"{}\"", k.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fixer = kinds[0];
    format!(
        r#"#:schema {SCHEMA}
# A starter pipeline written by `orch init`. The reference for every key is
# docs/pipeline.md in orch's repository; `orch explain` shows what each
# agent may do here and who enforces it.
version = 1
name = "starter"
description = "Audit the repository, then fix what the audit found."

[defaults]
timeout = "30m"          # per attempt; a phase that takes longer fails
retries = 1              # one more attempt after a failure

{audit_comment}
[[phases]]
name = "audit"
agents = [{audit}]
parallel = true
mode = "audit"
prompt = """
Audit this repository for bugs, security problems and missing tests.
Report each problem with orch's add_finding tool: the file, the line, what
is wrong and how you found it. Change nothing.
"""

[phases.tools]
internal = ["Read", "Glob", "Grep"]   # what the agent CLI itself offers
permission = "read-only"              # {held}
max_turns = 40

{fix_comment}
[[phases]]
name = "fix"
agents = [{fix}]
depends_on = ["audit"]
mode = "fix"
prompt = """
Fix the most important findings of the audit phase (the latest come with
this task), one at a time, with a test for each where the project has
tests. Run the tests before you finish.
"""

[phases.tools]
internal = [{fix_tools}]
permission = "workspace-write"
max_turns = 80
"#,
        audit = list(kinds),
        fix = list(&[fixer]),
        audit_comment = if confined {
            "# Every agent below audits at the same time. Read-only: the agent CLIs\n\
             # get only these tools, and the operating system (Landlock on Linux) keeps\n\
             # each agent's whole process tree from writing anywhere but its own\n\
             # temporary folder."
        } else {
            "# Every agent below audits at the same time. Read-only: the agent CLIs\n\
             # get only these tools and hold their own read-only rules. orch does not\n\
             # confine agents on this machine (`orch doctor` says why), so no shell\n\
             # is granted: nothing would hold what a shell starts."
        },
        held = if confined {
            "held by the OS, not by the prompt"
        } else {
            "held by each CLI's own rules"
        },
        fix_comment = if bash {
            "# One agent fixes the findings, after the audit succeeded. It may edit\n\
             # files and run commands, but only inside this folder."
        } else {
            "# One agent fixes the findings, after the audit succeeded. It may edit\n\
             # files inside this folder. `Bash` is left out: orch does not confine\n\
             # agents on this machine (`orch doctor` says why), so nothing would hold\n\
             # what a shell starts to this folder, and orch refuses what it cannot\n\
             # enforce."
        },
        fix_tools = if bash {
            r#""Read", "Glob", "Grep", "Edit", "Write", "Bash""#
        } else {
            r#""Read", "Glob", "Grep", "Edit", "Write""#
        },
    )
}

/// Project settings, all at their defaults, commented out.
const SETTINGS: &str = r#"# Project settings for orch, written by `orch init --settings`. Every key
# is at its default (commented out). `orch config` prints the effective
# settings and where each came from; settings.md in orch's docs lists them.
# Which programs run, what they inherit and how they are confined are the
# user's choice, set in ~/.config/orch/config.toml, not here.

# Where runs are recorded (state.db): by default this repository's own
# folder outside it (~/.local/state/orch/<repo>-<hash>). One inside the
# workspace is refused where an agent may write the workspace.
# state_dir = "/srv/orch-state"

# Agent processes at once when a pipeline does not say.
# max_parallel = 2

# The project documents agents search with orch's search_knowledge tool.
# knowledge = ["README.md", "docs/**/*.md"]

# The budget of a task's context sections, in tokens.
# prompt_tokens = 8000

# The project's instructions for agents, by profile ("*": every agent).
# [instructions]
# "*" = "Run the tests with `cargo test` before you finish."
"#;

fn next_steps(args: &Args, kinds: &[AgentKind], detected: bool, bash: bool) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let at = |rel: &str| args.dir.join(rel).display().to_string();
    let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    let how = if detected {
        "installed here"
    } else if args.agents.is_empty() {
        "no agent CLI found on PATH; install one, or choose with --agents"
    } else {
        "as asked"
    };
    writeln!(
        out,
        "wrote {} (audit: {}; fix: {}; {how})",
        at("pipeline.toml"),
        names.join(", "),
        names[0]
    )?;
    writeln!(
        out,
        "wrote {} (editors check the pipeline against it; `orch schema` writes it again)",
        at(SCHEMA)
    )?;
    if args.settings {
        writeln!(out, "wrote {}", at("orch.toml"))?;
    }
    if !bash {
        writeln!(
            out,
            "note: the fix phase cannot run commands (no Bash): orch does not confine agents here, so nothing would hold what a shell starts"
        )?;
    }
    let here = std::env::current_dir().ok();
    let cd = if args.dir.as_os_str().is_empty()
        || args.dir == Path::new(".")
        || args.dir == Path::new("./")
        || here.as_deref() == Some(args.dir.as_path())
    {
        String::new()
    } else {
        format!(
            "cd {} && ",
            crate::agents::invocation::shell_quote(&args.dir.display().to_string())
        )
    };
    writeln!(out, "\nnext:")?;
    writeln!(out, "  {cd}orch validate     check it (it passes now)")?;
    writeln!(
        out,
        "  {cd}orch explain      each agent's tools, who enforces them, the exact command lines"
    )?;
    writeln!(
        out,
        "  {cd}orch run          run it; the agents need their credentials:"
    )?;
    for k in kinds {
        writeln!(
            out,
            "      {:<9} {}",
            k.as_str(),
            k.credentials().join(" or ")
        )?;
    }
    Ok(())
}

//! An Invocation: exactly what orch runs for one agent in one phase, and how
//! each ToolSet field is enforced.
//!
//! `explain`, `doctor --probe` and `run` all print or execute the same
//! value, so what a user previews is what runs.

use std::borrow::Cow;
use std::path::PathBuf;

use serde::Serialize;

use crate::confine::{Child, ConfineError, Confinement, Launch, ProcessTree};

/// Who enforces a ToolSet field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::Display)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub(crate) enum By {
    /// The agent CLI itself (it hides or refuses what is not allowed).
    Cli,
    /// orch, from outside (for example by counting turns and stopping the
    /// process).
    Orch,
    /// The operating system: orch confines the agent's whole process tree
    /// (Landlock), whatever the CLI or anything it starts does.
    Os,
    /// Nobody: the CLI cannot do what the field asks.
    None,
}

/// How one field is enforced, with a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Enforced {
    pub(crate) by: By,
    /// Most reasons are fixed sentences: borrowed, not copied into a new
    /// `String` for every (phase, agent) validation checks.
    pub(crate) reason: Cow<'static, str>,
}

impl Enforced {
    pub(crate) fn cli(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            by: By::Cli,
            reason: reason.into(),
        }
    }
    pub(crate) fn orch(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            by: By::Orch,
            reason: reason.into(),
        }
    }
    pub(crate) fn os(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            by: By::Os,
            reason: reason.into(),
        }
    }
    pub(crate) fn none(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            by: By::None,
            reason: reason.into(),
        }
    }
}

/// The enforcement of each ToolSet field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Enforcement {
    pub(crate) internal: Enforced,
    pub(crate) mcp: Enforced,
    pub(crate) permission: Enforced,
    pub(crate) max_turns: Enforced,
}

impl Enforcement {
    /// Fields no one enforces, as (field, reason).
    pub(crate) fn gaps(&self) -> Vec<(&'static str, &str)> {
        [
            ("internal", &self.internal),
            ("mcp", &self.mcp),
            ("permission", &self.permission),
            ("max_turns", &self.max_turns),
        ]
        .into_iter()
        .filter(|(_, e)| e.by == By::None)
        .map(|(f, e)| (f, e.reason.as_ref()))
        .collect()
    }
}

/// One environment variable of the agent process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvVar {
    pub(crate) name: String,
    pub(crate) value: EnvValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EnvValue {
    /// A value orch sets (paths, switches): shown as is.
    Plain(String),
    /// Taken from orch's own environment at spawn time (credentials): never
    /// shown or stored.
    PassThrough,
    /// As [`EnvValue::PassThrough`], but set empty when orch's environment
    /// lacks it, so that the CLI cannot take it from a file of the
    /// workspace (Gemini's `.env`): shown as `${NAME:-}`.
    PassThroughOrEmpty,
    /// A value with `${VAR}` references filled from orch's environment at
    /// spawn time; shown unexpanded, so secrets never appear.
    Template(String),
    /// A value that holds a secret: shown and stored redacted.
    Secret(String),
}

pub(crate) const REDACTED: &str = "<redacted>";

impl EnvVar {
    pub(crate) fn plain(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: EnvValue::Plain(value.into()),
        }
    }

    pub(crate) fn pass_through(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: EnvValue::PassThrough,
        }
    }

    /// The value as shown or stored.
    pub(crate) fn shown(&self) -> String {
        match &self.value {
            EnvValue::Plain(v) => v.clone(),
            EnvValue::PassThrough => format!("${{{}}}", self.name),
            EnvValue::PassThroughOrEmpty => format!("${{{}:-}}", self.name),
            EnvValue::Template(t) => t.clone(),
            EnvValue::Secret(_) => REDACTED.into(),
        }
    }

    /// The value to give the process, if there is one (a pass-through
    /// variable that orch's environment lacks is left out).
    pub(crate) fn resolve(&self, lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
        match &self.value {
            EnvValue::Plain(v) | EnvValue::Secret(v) => Some(v.clone()),
            EnvValue::PassThrough => lookup(&self.name),
            EnvValue::PassThroughOrEmpty => Some(lookup(&self.name).unwrap_or_default()),
            EnvValue::Template(t) => Some(super::env::expand(t, &lookup)),
        }
    }
}

/// A file the adapter needs written before the process starts (MCP config,
/// settings, policy, system prompt) and removed after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct InvocationFile {
    pub(crate) path: PathBuf,
    pub(crate) content: String,
}

/// What the process reads on standard input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdin {
    Null,
    Text(String),
}

/// Everything needed to start one agent attempt.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub program: String,
    pub args: Vec<String>,
    /// The whole environment: nothing else is inherited.
    pub(crate) env: Vec<EnvVar>,
    pub stdin: Stdin,
    /// Working directory of the agent (the workspace).
    pub(crate) cwd: PathBuf,
    /// The invocation's own directory (temporary home, config files).
    pub(crate) dir: PathBuf,
    pub(crate) files: Vec<InvocationFile>,
    pub(crate) enforcement: Enforcement,
    /// The size of the prompts it sends (kept with the attempt).
    pub(crate) prompt_tokens: crate::prompt::Tokens,
    /// Plain commands inherit orch's environment (they are the author's own
    /// programs); agent CLIs get only `env`.
    pub inherit_env: bool,
    /// How the OS confines the process tree, when it does.
    pub confinement: Option<Confinement>,
    /// The argv, variables and files as shown and stored, when they differ
    /// from the real ones: a secret the pipeline wrote in an argv (a plain
    /// command's, an MCP server's) redacted. `None`: shown as they are.
    pub(crate) shown: Option<Shown>,
    /// The git directory of orch's own an agent CLI is given (see
    /// [`crate::git::agents`]), made with the attempt's own directory.
    pub(crate) git: Option<crate::git::agents::AgentGit>,
    /// The shells a confined CLI starts the model's commands with (see
    /// [`crate::confine::shell`]), made with the attempt's own directory.
    pub(crate) shells: Option<Shells>,
    /// The copy of the CLI's own program a confined CLI that runs the
    /// model's commands in its own domain (Codex) is started from, so none
    /// can reach into it (see [`crate::confine::undumpable`]); made as the
    /// attempt starts. `program` is its path.
    pub(crate) undumpable: Option<std::sync::Arc<crate::confine::undumpable::ExecOnlyCopy>>,
}

/// Where a confined CLI finds its shells, and the run's program they are
/// hard links to; `Err` says why there is none (the attempt does not
/// start).
#[derive(Debug, Clone)]
pub(crate) struct Shells {
    pub(crate) folder: PathBuf,
    pub(crate) program: Result<std::sync::Arc<crate::confine::shell::Program>, String>,
    /// The folders the CLI's git writes besides the commands', made
    /// before it starts.
    pub(crate) git_dirs: Vec<PathBuf>,
    /// The trees the agent may write (the workspace and its policy's):
    /// no folder that leads into them stays on the CLI's `PATH` (see
    /// [`crate::path_env::Trees`]).
    pub(crate) writable: Vec<PathBuf>,
}

/// An agent CLI's `PATH`: the agent's, whole (what its commands get
/// back), and the CLI's, without the folders an agent could have written
/// (see [`crate::path_env::Trees::path_without`]); whether any were left
/// out.
struct CliPath {
    whole: String,
    cli: std::ffi::OsString,
    left_out: bool,
}

/// What to show of an invocation whose real argv, environment or files
/// carry a secret of the pipeline's argvs (see
/// [`super::env::shown_argv`]): the whole argv, and the variables (by
/// name) and files (by path) whose shown form differs from the real one
/// (OpenCode gets its MCP servers in a variable, Claude Code in a file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) files: Vec<InvocationFile>,
}

impl Shown {
    /// What differs between `real` and `redacted`, two invocations of the
    /// same request, the second with the pipeline's argvs redacted.
    pub(crate) fn between(real: &Invocation, redacted: Invocation) -> Shown {
        let argv = redacted.program_and_args();
        let env = redacted
            .env
            .iter()
            .filter(|v| {
                real.env
                    .iter()
                    .rfind(|r| r.name == v.name)
                    .is_none_or(|r| r.shown() != v.shown())
            })
            .map(|v| (v.name.clone(), v.shown()))
            .collect();
        let files = redacted
            .files
            .into_iter()
            .filter(|f| !real.files.contains(f))
            .collect();
        Shown { argv, env, files }
    }
}

impl Invocation {
    /// `argv[0]` and the arguments, as the process gets them: never show
    /// or store this, but [`Invocation::shown_argv`].
    pub(crate) fn argv(&self) -> Vec<String> {
        self.program_and_args()
    }

    fn program_and_args(&self) -> Vec<String> {
        std::iter::once(self.program.clone())
            .chain(self.args.iter().cloned())
            .collect()
    }

    /// The argv as shown and stored: secrets the pipeline wrote in it
    /// `<redacted>`.
    pub(crate) fn shown_argv(&self) -> Vec<String> {
        match &self.shown {
            Some(s) => s.argv.clone(),
            None => self.argv(),
        }
    }

    /// The files as shown: secrets the pipeline wrote in an MCP server's
    /// command `<redacted>` in the configuration that carries it.
    pub(crate) fn shown_files(&self) -> Vec<InvocationFile> {
        self.files
            .iter()
            .map(|f| {
                self.shown
                    .iter()
                    .flat_map(|s| &s.files)
                    .find(|s| s.path == f.path)
                    .unwrap_or(f)
                    .clone()
            })
            .collect()
    }

    /// A variable's value as shown (see [`EnvVar::shown`]), or the
    /// redacted form of a value that carries a secret of the pipeline's
    /// argvs.
    fn shown_value(&self, var: &EnvVar) -> String {
        self.shown
            .iter()
            .flat_map(|s| &s.env)
            .find(|(name, _)| *name == var.name)
            .map_or_else(|| var.shown(), |(_, v)| v.clone())
    }

    /// A process for `program` with `args`, run where the invocation runs
    /// (its working directory, its own process group) with exactly the
    /// invocation's environment, values looked up through `lookup`; an
    /// agent CLI's `PATH` without the folders an agent could have written
    /// (see [`Invocation::path_trees`]). Start it with
    /// [`crate::confine::start`], which confines it.
    pub fn command(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[String],
        lookup: impl Fn(&str) -> Option<String>,
    ) -> std::process::Command {
        let path = self.cli_path(&self.path_trees(), &lookup);
        self.command_with(program, args, lookup, path)
    }

    /// The agent's own process ([`Invocation::command`]), its program
    /// found: an agent CLI named without a path on its `PATH` past the
    /// folders an agent could have written, and not a file that leads into
    /// them. Started from there, a program an earlier agent put there (a
    /// `claude` in `.venv/bin`) would be the CLI, unconfined at
    /// `full-access`. `None`: not found so. A plain command is the
    /// author's own, looked up as a shell would (its `.venv/bin` too).
    pub(crate) fn start_command(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Option<std::process::Command> {
        let trees = self.path_trees();
        let path = self.cli_path(&trees, &lookup);
        let program: std::ffi::OsString = match (&trees, &path) {
            (Some(trees), Some(path)) if !self.program.contains('/') => {
                trees.find_on(&self.program, &path.cli, &self.cwd)?.into()
            }
            _ => self.program.clone().into(),
        };
        Some(self.command_with(program, &self.args, lookup, path))
    }

    /// The agent CLI's `PATH` (none for a plain command, or without one),
    /// split once: see [`CliPath`].
    fn cli_path(
        &self,
        trees: &Option<crate::path_env::Trees>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Option<CliPath> {
        let trees = trees.as_ref()?;
        let whole = self.path_value(lookup)?;
        let (cli, left_out) = trees.path_without(std::ffi::OsStr::new(&whole));
        Some(CliPath {
            whole,
            cli,
            left_out: !left_out.is_empty(),
        })
    }

    fn command_with(
        &self,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[String],
        lookup: impl Fn(&str) -> Option<String>,
        path: Option<CliPath>,
    ) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args).current_dir(&self.cwd).process_group(0);
        if !self.inherit_env {
            cmd.env_clear();
            for name in super::env::LOADERS {
                cmd.env(name, "");
            }
        }
        use crate::confine::shell::{CLI_PATH, COMMAND_PATH};
        for var in &self.env {
            if var.name == "PATH"
                && let Some(path) = &path
            {
                cmd.env("PATH", &path.cli);
            } else if let Some(path) = path
                .as_ref()
                .filter(|p| p.left_out && self.shells.is_some())
                && (var.name == CLI_PATH || var.name == COMMAND_PATH)
            {
                // The model's commands get the whole `PATH` back, in the
                // first shell the CLI starts (see
                // [`crate::confine::shell::commands_path`]); empty (as
                // the invocation says) when nothing was left out.
                if var.name == CLI_PATH {
                    cmd.env(CLI_PATH, &path.cli);
                } else {
                    cmd.env(COMMAND_PATH, &path.whole);
                }
            } else if let Some(v) = var.resolve(&lookup) {
                cmd.env(&var.name, v);
            }
        }
        cmd
    }

    /// The trees an agent CLI's `PATH` and program must not lead into:
    /// the workspace and, confined, its policy's writable folders. None
    /// for a plain command.
    fn path_trees(&self) -> Option<crate::path_env::Trees> {
        if self.inherit_env {
            return None;
        }
        Some(crate::path_env::Trees::new(match &self.shells {
            Some(shells) => shells.writable.clone(),
            None => vec![self.cwd.clone()],
        }))
    }

    /// The agent's `PATH`, its values looked up through `lookup`.
    pub(crate) fn path_value(&self, lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
        self.env
            .iter()
            .rfind(|v| v.name == "PATH")
            .and_then(|v| v.resolve(lookup))
    }

    /// The folders of the agent's `PATH`, its values looked up through
    /// `lookup`, that its CLI does not get (see [`Invocation::command`]).
    pub(crate) fn cli_path_left_out(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Vec<PathBuf> {
        match (self.path_trees(), self.path_value(lookup)) {
            (Some(trees), Some(path)) => trees.path_without(std::ffi::OsStr::new(&path)).1,
            _ => Vec::new(),
        }
    }

    /// The environment as shown (`${NAME}` for pass-through values,
    /// `<redacted>` for secrets), sorted by name.
    pub(crate) fn shown_env(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .env
            .iter()
            .map(|e| (e.name.clone(), self.shown_value(e)))
            .collect();
        v.sort();
        v
    }

    /// A copy-pasteable POSIX shell line: `env -i NAME=... program args...`.
    pub(crate) fn shell_line(&self) -> String {
        let mut parts = vec!["env".to_string()];
        if !self.inherit_env {
            parts.push("-i".to_string());
        }
        let mut env: Vec<&EnvVar> = self.env.iter().collect();
        env.sort_by(|a, b| a.name.cmp(&b.name));
        for var in env {
            let name = &var.name;
            parts.push(match &var.value {
                // Filled in by the shell from the user's environment.
                EnvValue::PassThrough => format!("{name}=\"${{{name}}}\""),
                EnvValue::PassThroughOrEmpty => format!("{name}=\"${{{name}:-}}\""),
                EnvValue::Template(t) => format!("{name}=\"{t}\""),
                _ => format!("{name}={}", shell_quote(&self.shown_value(var))),
            });
        }
        parts.extend(self.shown_argv().iter().map(|a| shell_quote(a)));
        let mut line = parts.join(" ");
        match &self.stdin {
            Stdin::Null => line.push_str(" < /dev/null"),
            Stdin::Text(_) => line.push_str(" < PROMPT"),
        }
        line
    }
}

/// Quote a word for a POSIX shell when it needs it.
pub(crate) fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Start the process `launch` describes, confined by `confinement`, or as
/// it is without one, in `tree`'s cgroup when it has one (see
/// [`crate::confine::start`]).
pub(crate) fn start(
    confinement: Option<&Confinement>,
    tree: Option<&ProcessTree>,
    launch: &Launch,
) -> Result<std::io::Result<Child>, ConfineError> {
    crate::confine::start(confinement, tree, launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--tools"), "--tools");
        assert_eq!(shell_quote("Read,Grep"), "Read,Grep");
        assert_eq!(shell_quote("Bash(cargo test *)"), "'Bash(cargo test *)'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn secrets_are_never_shown() {
        let v = EnvVar {
            name: "K".into(),
            value: EnvValue::Secret("sk-123".into()),
        };
        assert_eq!(v.shown(), REDACTED);
        assert_eq!(
            EnvVar::pass_through("ANTHROPIC_API_KEY").shown(),
            "${ANTHROPIC_API_KEY}"
        );
        assert_eq!(
            EnvVar::pass_through("X").resolve(|n| (n == "X").then(|| "1".into())),
            Some("1".into())
        );
    }
}

//! User and project settings (not pipeline files), layered with figment:
//! built-in defaults < `~/.config/orch/config.toml` < `./orch.toml` <
//! `ORCH_*` environment < command-line flags.
//!
//! Settings files are TOML read with the same `toml` crate as pipelines (a
//! small figment provider below), so no second TOML parser is linked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Serialized};
use figment::value::{Dict, Map};
use figment::{Figment, Metadata, Profile, Provider};
use serde::{Deserialize, Serialize};

use crate::agents::CliFacts;
use crate::model::{AgentKind, ConfinementMode};

/// The effective settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Where runs are recorded (`state.db`, logs); by default a folder of
    /// the repository's own outside it (see `Context::state_dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<PathBuf>,
    /// Agent processes at once when a pipeline does not say.
    pub(crate) max_parallel: u32,
    /// Per-kind agent settings.
    #[serde(default)]
    pub agents: BTreeMap<AgentKind, AgentSettings>,
    /// Whether orch confines agents at the operating-system level.
    #[serde(default)]
    pub(crate) confinement: ConfinementMode,
    /// Folders in the home directory confined agents may read, besides the
    /// built-in toolchain folders (`~/...` or absolute paths).
    #[serde(default)]
    pub(crate) allow_read: Vec<String>,
    /// The project documents agents search with `search_knowledge`: glob
    /// patterns relative to the workspace.
    #[serde(default = "default_knowledge")]
    pub(crate) knowledge: Vec<String>,
    /// The project's instructions for agents, by profile name (`"*"`: for
    /// every agent); a layer of each agent's system prompt.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) instructions: BTreeMap<String, String>,
    /// The budget of a task's context sections, in tokens (4 characters a
    /// token).
    #[serde(default = "default_prompt_tokens")]
    pub(crate) prompt_tokens: usize,
}

fn default_prompt_tokens() -> usize {
    crate::prompt::budget::DEFAULT_TOKENS
}

fn default_knowledge() -> Vec<String> {
    vec!["README.md".into(), "docs/**/*.md".into()]
}

/// Keys a project's `./orch.toml` may not set: which programs run, what
/// they inherit and how they are confined are the user's choice, not the
/// repository's (a pull request could otherwise swap an agent's binary).
const USER_ONLY: &[&str] = &["confinement", "allow_read"];
const USER_ONLY_AGENT_KEYS: &[&str] = &["binary", "pass_env"];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    /// The program to run for this kind (overrides PATH lookup of the
    /// default name; a pipeline's `binary` still wins).
    pub binary: String,
    /// Variables passed from orch's environment to this CLI (credentials);
    /// nothing else is inherited.
    pub(crate) pass_env: Vec<String>,
    /// The model agents of this kind use when nothing in the pipeline
    /// names one (else the CLI's own default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        let agents = AgentKind::ALL
            .iter()
            .copied()
            .filter_map(|k| {
                k.default_binary().map(|b| {
                    (
                        k,
                        AgentSettings {
                            binary: b.to_string(),
                            pass_env: k.default_pass_env().iter().map(|s| s.to_string()).collect(),
                            model: None,
                        },
                    )
                })
            })
            .collect();
        Self {
            state_dir: None,
            max_parallel: default_max_parallel(),
            agents,
            confinement: ConfinementMode::Auto,
            allow_read: Vec::new(),
            knowledge: default_knowledge(),
            instructions: BTreeMap::new(),
            prompt_tokens: default_prompt_tokens(),
        }
    }
}

fn default_max_parallel() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(4)
        .max(2)
}

/// Values given on the command line (highest priority).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) state_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_parallel: Option<u32>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) agents: BTreeMap<AgentKind, BinaryOverride>,
}

/// `--agent-binary KIND=PATH`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BinaryOverride {
    pub(crate) binary: String,
}

/// Where the settings files are.
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub(crate) user: Option<PathBuf>,
    pub(crate) project: PathBuf,
}

impl Sources {
    /// `$XDG_CONFIG_HOME/orch/config.toml` (else `~/.config/...`) and
    /// `./orch.toml`.
    pub(crate) fn discover() -> Self {
        let user = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .map(|d| d.join("orch").join("config.toml"));
        Self {
            user,
            project: PathBuf::from("orch.toml"),
        }
    }
}

/// The layered settings and the figment that knows where each value came
/// from.
#[derive(Debug)]
pub(crate) struct Layered {
    pub(crate) settings: Settings,
    figment: Figment,
}

#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("invalid settings: {message}")]
#[diagnostic(
    code(orch::settings::invalid),
    help(
        "see `orch config` for the keys: state_dir, max_parallel, agents.<kind>.binary, agents.<kind>.pass_env, confinement, allow_read, knowledge"
    )
)]
pub(crate) struct SettingsError {
    message: String,
}

pub(crate) fn load(sources: &Sources, overrides: &Overrides) -> Result<Layered, SettingsError> {
    let mut figment =
        Figment::from(Serialized::defaults(Settings::default()).profile(Profile::Default));
    if let Some(user) = &sources.user {
        figment = figment.merge(TomlFile::new(user, "user config"));
    }
    figment = figment
        .merge(TomlFile::new(&sources.project, "project config").project())
        .merge(
            Env::prefixed("ORCH_")
                .split("__")
                .map(|k| k.as_str().to_ascii_lowercase().into())
                .filter(|k| {
                    let k = k.as_str();
                    [
                        "state_dir",
                        "max_parallel",
                        "confinement",
                        "allow_read",
                        "prompt_tokens",
                    ]
                    .contains(&k)
                        || k.starts_with("agents")
                }),
        )
        .merge(Serialized::defaults(overrides).profile(Profile::Default));
    let settings: Settings = figment.extract().map_err(|e| SettingsError {
        message: e
            .into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; "),
    })?;
    if settings.prompt_tokens < 100 {
        return Err(SettingsError {
            message: format!(
                "prompt_tokens must be at least 100, found {}",
                settings.prompt_tokens
            ),
        });
    }
    if settings.max_parallel == 0 {
        return Err(SettingsError {
            message: "max_parallel must be at least 1".into(),
        });
    }
    for pattern in &settings.knowledge {
        if let Some(why) = knowledge_problem(pattern) {
            return Err(SettingsError {
                message: format!("knowledge pattern `{pattern}` {why}"),
            });
        }
    }
    Ok(Layered { settings, figment })
}

/// What is wrong with a `knowledge` pattern: it must be a glob inside
/// the workspace.
fn knowledge_problem(pattern: &str) -> Option<String> {
    let path = Path::new(pattern);
    if pattern.is_empty() {
        return Some("is empty".into());
    }
    if path.is_absolute() {
        return Some("is absolute: write it relative to the workspace, like `docs/**/*.md`".into());
    }
    if path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Some("leaves the workspace (`..`)".into());
    }
    glob::Pattern::new(pattern)
        .err()
        .map(|e| format!("is not a glob pattern: {e}"))
}

impl Layered {
    /// Each effective value (dotted key, value) and where it came from.
    pub(crate) fn explain(&self) -> Vec<(String, String, String)> {
        let mut rows = Vec::new();
        let value = serde_json::to_value(&self.settings).unwrap_or_default();
        flatten("", &value, &mut rows);
        rows.into_iter()
            .map(|(key, v)| {
                let from = self
                    .figment
                    .find_metadata(&key)
                    .map(|m| describe(m, &key))
                    .unwrap_or_else(|| "default".into());
                (key, v, from)
            })
            .collect()
    }
}

fn describe(m: &Metadata, key: &str) -> String {
    // `Serialized` providers are named after their Rust type.
    if m.name.ends_with("settings::Settings") {
        return "default".into();
    }
    if m.name.ends_with("settings::Overrides") {
        return "command line".into();
    }
    match &m.source {
        Some(figment::Source::File(p)) => format!("{} ({})", m.name, p.display()),
        // Keys map to variables as `ORCH_` + the dotted key with `.` as `__`.
        _ if m.name.contains("environment") => format!(
            "environment (ORCH_{})",
            key.split('.')
                .map(str::to_ascii_uppercase)
                .collect::<Vec<_>>()
                .join("__")
        ),
        _ => m.name.to_string(),
    }
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, out);
            }
        }
        serde_json::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// A figment provider for an optional TOML settings file, parsed with the
/// `toml` crate orch already uses for pipelines.
struct TomlFile {
    path: PathBuf,
    name: &'static str,
    /// A repository's file: it may not set the user-only keys.
    project: bool,
}

impl TomlFile {
    fn new(path: &Path, name: &'static str) -> Self {
        Self {
            path: path.to_path_buf(),
            name,
            project: false,
        }
    }

    fn project(mut self) -> Self {
        self.project = true;
        self
    }
}

/// The user-only keys a project settings table sets, dotted.
fn user_only_keys(table: &toml::Table) -> Vec<String> {
    let mut found: Vec<String> = USER_ONLY
        .iter()
        .filter(|k| table.contains_key(**k))
        .map(|k| k.to_string())
        .collect();
    if let Some(toml::Value::Table(agents)) = table.get("agents") {
        for (kind, v) in agents {
            if let toml::Value::Table(t) = v {
                for key in USER_ONLY_AGENT_KEYS.iter().filter(|k| t.contains_key(**k)) {
                    found.push(format!("agents.{kind}.{key}"));
                }
            }
        }
    }
    found
}

impl Provider for TomlFile {
    fn metadata(&self) -> Metadata {
        Metadata::from(self.name, figment::Source::File(self.path.clone()))
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
            Err(e) => {
                return Err(figment::Error::from(format!(
                    "{}: {e}",
                    self.path.display()
                )));
            }
        };
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            figment::Error::from(format!("{}: {}", self.path.display(), e.message().trim()))
        })?;
        if self.project {
            let keys = user_only_keys(&table);
            if !keys.is_empty() {
                return Err(figment::Error::from(format!(
                    "{} may only be set in your user config (~/.config/orch/config.toml), \
                     ORCH_* variables or flags, not in a repository's settings",
                    keys.iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Serialized::defaults(table).data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        let project = dir.path().join("orch.toml");
        std::fs::write(
            &user,
            "state_dir = \"/from/user\"\nmax_parallel = 3\n[agents.claude]\nbinary = \"/opt/claude\"\n",
        )
        .unwrap();
        std::fs::write(&project, "max_parallel = 5\n").unwrap();
        let sources = Sources {
            user: Some(user),
            project,
        };
        let l = load(&sources, &Overrides::default()).unwrap();
        assert_eq!(l.settings.state_dir, Some(PathBuf::from("/from/user")));
        assert_eq!(l.settings.max_parallel, 5);
        assert_eq!(l.settings.agents[&AgentKind::Claude].binary, "/opt/claude");
        assert_eq!(l.settings.agents[&AgentKind::Codex].binary, "codex");
        let rows = l.explain();
        let from = |key: &str| rows.iter().find(|r| r.0 == key).unwrap().2.clone();
        assert!(from("state_dir").starts_with("user config"), "{rows:?}");
        assert!(from("max_parallel").starts_with("project config"));
        assert!(from("agents.claude.binary").starts_with("user config"));
        assert_eq!(l.settings.confinement, ConfinementMode::Auto);
        assert_eq!(from("agents.codex.binary"), "default");

        let flags = Overrides {
            max_parallel: Some(9),
            ..Default::default()
        };
        let l = load(&sources, &flags).unwrap();
        assert_eq!(l.settings.max_parallel, 9);
    }

    #[test]
    fn a_repository_cannot_choose_programs_inheritance_or_confinement() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("orch.toml");
        let sources = Sources {
            user: None,
            project: project.clone(),
        };
        for (text, key) in [
            (
                "[agents.claude]\nbinary = \"/tmp/evil\"\n",
                "agents.claude.binary",
            ),
            (
                "[agents.codex]\npass_env = [\"AWS_SECRET_ACCESS_KEY\"]\n",
                "agents.codex.pass_env",
            ),
            ("confinement = \"off\"\n", "confinement"),
            ("allow_read = [\"~/.ssh\"]\n", "allow_read"),
        ] {
            std::fs::write(&project, text).unwrap();
            let e = load(&sources, &Overrides::default()).unwrap_err();
            assert!(
                e.to_string().contains(&format!("`{key}`"))
                    && e.to_string().contains("user config"),
                "{e}"
            );
        }
        // The user's own file may.
        let user = dir.path().join("user.toml");
        std::fs::write(
            &user,
            "confinement = \"off\"\nallow_read = [\"~/.config/gh\"]\n",
        )
        .unwrap();
        std::fs::write(&project, "max_parallel = 2\n").unwrap();
        let l = load(
            &Sources {
                user: Some(user),
                project,
            },
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(l.settings.confinement, ConfinementMode::Off);
        assert_eq!(l.settings.allow_read, vec!["~/.config/gh".to_string()]);
    }

    #[test]
    fn bad_files_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("orch.toml");
        std::fs::write(&project, "max_paralel = 5\n").unwrap();
        let sources = Sources {
            user: None,
            project,
        };
        let e = load(&sources, &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("max_paralel"), "{e}");
    }
}

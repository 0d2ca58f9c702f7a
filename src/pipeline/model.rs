//! The validated pipeline: the span-free model everything after validation
//! works on. Positions survive only as [`Location`]s, for provenance.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::AgentKind;
use crate::model::Location;
use crate::model::toolset::{Layer, Layers, Mode, Permission, Resolved, ToolSetLayer, resolve};

/// What to do with a ToolSet field a CLI cannot enforce.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum Enforcement {
    #[default]
    Strict,
    BestEffort,
}

impl Enforcement {
    pub(crate) const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

#[derive(Debug, Clone)]
pub struct Pipeline {
    /// The pipeline file as named on the command line.
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) defaults: Defaults,
    /// Every agent a phase names: declared tables and built-in kinds used
    /// by name, in first-use order.
    pub(crate) agents: Vec<Agent>,
    pub(crate) mcp_servers: Vec<McpServer>,
    /// Boxed: each is made as its raw phase is freed, into the memory it
    /// held (one vector of 100,000 phases was a fresh 32 MB).
    pub phases: Vec<Box<Phase>>,
    /// Each phase's place in `phases`, by name (the last of a name): a
    /// table of places hashed by the names in `phases`, which are not
    /// copied (a map keyed by names was 100,000 copies for a long chain).
    index: hashbrown::HashTable<usize>,
    hasher: foldhash::fast::RandomState,
    /// The agents that may write the workspace (LLM agents at
    /// `workspace-write` or `full-access`), in the order they run: listed
    /// once, when first asked ([`Pipeline::writer_before`]).
    writers: std::sync::OnceLock<Vec<Writer>>,
    /// The `depends_on` edges, built when first walked.
    dependencies: std::sync::OnceLock<super::graph::Dependencies>,
}

/// One agent that may write the workspace, by places rather than cloned
/// names.
#[derive(Debug, Clone)]
struct Writer {
    /// Its phase's place in `phases` (the phase it judges, for a judge).
    phase: usize,
    /// Its place in `agents`.
    agent: usize,
    /// The place `index` gives its phase's name, which the order test walks
    /// from (the same place unless two phases share the name); `None` when
    /// the name has no place, and the writer comes before every phase.
    walk_from: Option<usize>,
}

/// What a pipeline is besides its agents, servers and phases.
#[derive(Debug, Clone)]
pub(crate) struct PipelineHead {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) description: Option<String>,
    pub(crate) defaults: Defaults,
}

#[derive(Debug, Clone)]
pub(crate) struct Defaults {
    pub(crate) mode: Mode,
    pub(crate) timeout: Option<Duration>,
    pub(crate) stall_timeout: Option<Duration>,
    pub(crate) retries: u32,
    pub(crate) max_parallel: Option<u32>,
    pub(crate) enforcement: Enforcement,
}

#[derive(Debug, Clone)]
pub struct Agent {
    pub name: String,
    pub(crate) kind: AgentKind,
    /// The program the pipeline names, if it names one (else the settings'
    /// binary for the kind, or `command[0]` for command agents).
    pub(crate) binary: Option<String>,
    pub(crate) model: Option<String>,
    /// Where `model` is written.
    pub(crate) model_at: Option<Location>,
    pub(crate) env: Vec<(String, String)>,
    /// Full argv for `command` agents.
    pub(crate) command: Option<Vec<String>>,
    pub(crate) modes: Vec<(Mode, ModeSettings)>,
}

impl Agent {
    /// A built-in agent named after its kind, with its defaults (a phase
    /// may name `claude` without an `[agents.claude]` table).
    pub(crate) fn builtin(name: &str, kind: AgentKind) -> Agent {
        Agent {
            name: name.to_string(),
            kind,
            binary: None,
            model: None,
            model_at: None,
            env: Vec::new(),
            command: None,
            modes: Vec::new(),
        }
    }

    pub(crate) fn mode(&self, mode: Mode) -> Option<&ModeSettings> {
        self.modes.iter().find(|(m, _)| *m == mode).map(|(_, s)| s)
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ModeSettings {
    pub(crate) tools: ToolSetLayer,
    pub(crate) flags: Vec<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct McpServer {
    pub(crate) name: String,
    pub(crate) transport: McpTransport,
    /// The pipeline vouches that the server's tools only read.
    pub(crate) read_only: bool,
    /// Where it was declared.
    pub(crate) source: McpSource,
}

/// How a CLI reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "transport")]
pub(crate) enum McpTransport {
    /// A process the CLI starts (it runs in the agent's process tree).
    Stdio {
        command: Vec<String>,
        env: Vec<(String, String)>,
    },
    /// A remote server over streamable HTTP (it runs elsewhere: nothing on
    /// this machine confines what its tools do).
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

/// Where an MCP server was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum McpSource {
    /// `[mcp_servers.NAME]` in the pipeline file.
    Pipeline(Location),
    /// The workspace's `.mcp.json` (Claude Code's project format).
    ProjectFile(PathBuf),
}

impl std::fmt::Display for McpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpSource::Pipeline(at) => write!(f, "{at}"),
            McpSource::ProjectFile(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A phase's contract: the artifact it must write and how it is judged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Contract {
    /// A path template with `{run}` and `{phase}`, relative to the workspace.
    pub(crate) artifact: String,
    /// Level-2 headings the artifact must have.
    pub(crate) required_sections: Vec<String>,
    pub(crate) validation: Validation,
    /// The judging agent (with `Validation::Judge`).
    pub(crate) judge: Option<String>,
    /// Rounds of work (and judgement) before the phase fails.
    pub(crate) max_attempts: u32,
}

impl Contract {
    /// The artifact's path for run `run` of phase `phase`.
    pub(crate) fn artifact_path(&self, run: &str, phase: &str) -> String {
        self.artifact
            .replace("{run}", run)
            .replace("{phase}", phase)
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::EnumString, strum::VariantNames,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Validation {
    /// The artifact exists and has every required section.
    Structural,
    /// Structural, then a judge approves or rejects it.
    Judge,
    /// The checks only warn.
    Trust,
}

impl Validation {
    pub(crate) const NAMES: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    pub(crate) fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Prompt {
    Inline(String),
    File { path: PathBuf, text: String },
}

impl Prompt {
    pub(crate) fn text(&self) -> &str {
        match self {
            Prompt::Inline(t) => t,
            Prompt::File { text, .. } => text,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Profile {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    pub(crate) tools: ToolSetLayer,
    /// The model the phase's agents use (over the agent's own `model`).
    pub(crate) model: Option<String>,
    /// Where `model` is written (in the profile file).
    pub(crate) model_at: Option<Location>,
    /// System prompt layers it does without (`learnings`, `instructions`).
    pub(crate) omit: Vec<String>,
    pub(crate) body: String,
}

#[derive(Debug, Clone)]
pub struct Phase {
    pub name: String,
    pub(crate) agents: Vec<String>,
    pub(crate) mode: Mode,
    pub(crate) parallel: bool,
    pub(crate) required: bool,
    pub(crate) depends_on: Vec<String>,
    pub(crate) prompt: Option<Prompt>,
    /// Boxed: most phases have none, and a phase is kept for each of a
    /// long pipeline's phases.
    pub(crate) profile: Option<Box<Profile>>,
    /// The model of every agent of the phase, and where it is written.
    pub(crate) model: Option<(String, Location)>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) stall_timeout: Option<Duration>,
    pub(crate) retries: u32,
    pub(crate) artifacts: Vec<String>,
    /// What the phase must deliver and how it is checked.
    pub(crate) contract: Option<Box<Contract>>,
    /// The phase's `tools`, when it has any (boxed, like `profile`).
    pub(crate) tools: Option<Box<ToolSetLayer>>,
    pub(crate) agent_tools: Vec<(String, ToolSetLayer)>,
    pub(crate) location: Location,
}

impl Phase {
    /// The phase `judge` runs as to judge this one: the same phase, in
    /// `review` mode, with only this phase's `agent_tools` for the judge
    /// (the workers' `tools` and profile are theirs), and `prompt`.
    pub(crate) fn for_judge(&self, judge: &str, prompt: String) -> Phase {
        Phase {
            agents: vec![judge.to_string()],
            mode: Mode::Review,
            parallel: false,
            prompt: Some(Prompt::Inline(prompt)),
            profile: None,
            model: None,
            artifacts: Vec::new(),
            contract: None,
            tools: None,
            agent_tools: self
                .agent_tools
                .iter()
                .filter(|(a, _)| a == judge)
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// The phase its judge runs as, for checks and previews (the artifact
    /// is not written yet).
    pub(crate) fn judge_preview(&self) -> Option<Phase> {
        let judge = self.contract.as_ref()?.judge.as_ref()?;
        Some(self.for_judge(
            judge,
            format!("Judge the artifact of phase `{}`.", self.name),
        ))
    }

    pub(crate) fn agent_tools(&self, agent: &str) -> Option<&ToolSetLayer> {
        self.agent_tools
            .iter()
            .find(|(a, _)| a == agent)
            .map(|(_, t)| t)
    }
}

impl Pipeline {
    pub(crate) fn agent(&self, name: &str) -> Option<&Agent> {
        self.place(name).map(|i| &self.agents[i])
    }

    /// Where the phase named `name` is in [`Pipeline::phases`] (the last
    /// of that name, when several have it).
    pub(crate) fn phase_index(&self, name: &str) -> Option<usize> {
        use std::hash::BuildHasher;
        self.index
            .find(self.hasher.hash_one(name), |&i| {
                self.phases.get(i).is_some_and(|p| p.name == name)
            })
            .copied()
    }

    pub(crate) fn phase(&self, name: &str) -> Option<&Phase> {
        self.phase_index(name).map(|i| &*self.phases[i])
    }

    /// A pipeline of these parts.
    #[expect(
        clippy::vec_box,
        reason = "phases are made one by one into the memory their raw phases freed (`phases`)"
    )]
    pub(crate) fn new(
        head: PipelineHead,
        agents: Vec<Agent>,
        mcp_servers: Vec<McpServer>,
        phases: Vec<Box<Phase>>,
    ) -> Pipeline {
        let phases_len = phases.len();
        let mut p = Pipeline {
            path: head.path,
            name: head.name,
            description: head.description,
            defaults: head.defaults,
            agents,
            mcp_servers,
            phases,
            index: hashbrown::HashTable::with_capacity(phases_len),
            hasher: Default::default(),
            writers: std::sync::OnceLock::new(),
            dependencies: std::sync::OnceLock::new(),
        };
        use std::hash::BuildHasher;
        let (phases, hasher) = (&p.phases, &p.hasher);
        for (i, ph) in phases.iter().enumerate() {
            let hash = hasher.hash_one(ph.name.as_str());
            match p.index.find_mut(hash, |&j| phases[j].name == ph.name) {
                Some(place) => *place = i,
                None => {
                    p.index
                        .insert_unique(hash, i, |&j| hasher.hash_one(phases[j].name.as_str()));
                }
            }
        }
        p
    }

    /// The resolved ToolSet of `agent` in `phase` (docs/pipeline.md, "How
    /// an agent's tools are resolved"), with each field's provenance.
    /// Computed when asked: the lists are shared with the layer that set
    /// them, so this is four lookups and a few counts, and a pipeline of
    /// 100,000 phases does not keep a resolved copy of each pair.
    pub fn resolve(&self, phase: &Phase, agent: &Agent) -> Resolved {
        resolve(Self::layers(phase, agent), phase.mode)
    }

    /// The four file layers for `agent` in `phase`, highest priority first.
    pub(crate) fn layers<'a>(phase: &'a Phase, agent: &'a Agent) -> Layers<'a> {
        [
            (Layer::AgentTools, phase.agent_tools(&agent.name)),
            (Layer::Tools, phase.tools.as_deref()),
            (Layer::Profile, phase.profile.as_ref().map(|p| &p.tools)),
            (Layer::Mode, agent.mode(phase.mode).map(|m| &m.tools)),
        ]
    }

    /// An agent that may write the workspace before or while `phase` runs
    /// (its phase and agent): an LLM agent at `workspace-write` or
    /// `full-access` (unconfined, it writes the workspace too) of
    /// `phase` itself, or of a phase that `phase` does not come before; a
    /// judge counts as an agent of the phase it judges.
    /// What it wrote there (a build script, a test, a git hook) is what a
    /// command of `phase` would run, so such a command without a
    /// `permission` of its own is held to the writer's level rather than
    /// run with all its user's rights.
    pub(crate) fn writer_before(&self, phase: &Phase) -> Option<(&str, &str)> {
        self.writers_before(phase).next()
    }

    /// Every agent that may write the workspace before or while `phase`
    /// runs, as [`Pipeline::writer_before`] names one.
    pub(crate) fn writers_before<'a>(
        &'a self,
        phase: &Phase,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let writers = self.writers.get_or_init(|| {
            self.positions()
                .filter(|&(_, ref w, j)| {
                    let agent = &self.agents[j];
                    agent.kind.is_llm()
                        && crate::model::toolset::resolve_permission(Self::layers(w, agent), w.mode)
                            != Permission::ReadOnly
                })
                .map(|(i, w, j)| Writer {
                    phase: i,
                    agent: j,
                    walk_from: self.phase_index(&w.name),
                })
                .collect()
        });
        // Those that do not come after `phase`: lazily, and each test
        // usually answers from the phases' stages without a walk (the
        // first writer usually answers).
        let before = self.phase_index(&phase.name);
        writers
            .iter()
            .filter(move |w| match (w.walk_from, before) {
                (Some(i), Some(b)) => !self.dependencies().depends_on(i, b),
                _ => true,
            })
            .map(|w| {
                (
                    self.phases[w.phase].name.as_str(),
                    self.agents[w.agent].name.as_str(),
                )
            })
    }

    /// The `depends_on` edges, built when first asked.
    pub(super) fn dependencies(&self) -> &super::graph::Dependencies {
        self.dependencies
            .get_or_init(|| super::graph::Dependencies::of(self))
    }

    /// Every phase `phases[i]` depends on, directly or not, in declaration
    /// order, on the file's `depends_on` (cycles and all).
    pub(crate) fn ancestors(&self, i: usize) -> Vec<usize> {
        self.dependencies().ancestors(i)
    }

    /// Every (phase, agent) pair that runs: the phases' agents in
    /// declaration order, then each phase's judge, as the phase it runs as
    /// ([`Phase::judge_preview`]: the phase in `review` mode).
    pub(crate) fn runs(&self) -> impl Iterator<Item = (Cow<'_, Phase>, &Agent)> {
        self.positions().map(|(_, p, j)| (p, &self.agents[j]))
    }

    /// [`Pipeline::runs`] by position: the phase's index in `phases` (a
    /// judge's: the phase it judges), the phase it runs as, the agent's
    /// index in `agents`.
    fn positions(&self) -> impl Iterator<Item = (usize, Cow<'_, Phase>, usize)> {
        let workers = self
            .workers()
            .map(|(i, p, agent)| (i, Cow::Borrowed(p), agent));
        let judges = self.phases.iter().enumerate().filter_map(move |(i, p)| {
            let j = p.judge_preview()?;
            let agent = self.place(j.agents.first()?)?;
            Some((i, Cow::Owned(j), agent))
        });
        workers.chain(judges)
    }

    /// Each phase's agents in declaration order, by position (see
    /// [`Pipeline::positions`]); an agent the file does not define is left out.
    fn workers(&self) -> impl Iterator<Item = (usize, &Phase, usize)> {
        self.phases.iter().enumerate().flat_map(move |(i, p)| {
            let p: &Phase = p;
            p.agents
                .iter()
                .filter_map(move |a| Some((i, p, self.place(a)?)))
        })
    }

    /// Where the agent `name` is in `agents`.
    fn place(&self, name: &str) -> Option<usize> {
        self.agents.iter().position(|a| a.name == name)
    }

    /// Every (phase, agent) pair in declaration order.
    pub fn invocations(&self) -> impl Iterator<Item = (&Phase, &Agent)> {
        self.workers().map(|(_, p, j)| (p, &self.agents[j]))
    }
}

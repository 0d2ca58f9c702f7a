//! A pipeline as CI jobs (`orch export github-actions|gitlab-ci`): one job
//! per phase, `needs` from `depends_on`, each job running `orch run FILE
//! --phase P` under one shared run id, carrying the run's state and the
//! phases' files from job to job, and a final job that merges every
//! phase's state and reports. The job graph is built once here; each CI
//! system only renders it.

pub(crate) mod github;
pub(crate) mod gitlab;
mod steps;

use std::collections::BTreeSet;

use crate::agents::CliFacts;
use crate::model::AgentKind;
use crate::model::Permission;
use crate::pipeline::Pipeline;
use crate::pipeline::graph::PhaseGraph;

/// Where orch comes from in a job. There is no default: a name on a
/// public registry can belong to someone else, so the exporter must say
/// which build the jobs run, pinned by commit or by checksum.
#[derive(Debug, Clone)]
pub(crate) enum OrchSource {
    /// `cargo install --locked --git URL --rev SHA orch` (a full SHA).
    Git { url: String, rev: String },
    /// A Linux x86_64 orch binary downloaded over HTTPS and installed
    /// only when its SHA-256 is the one given.
    Binary { url: String, sha256: String },
}

impl OrchSource {
    /// The shell command that installs it (`orch` on `PATH` afterwards;
    /// `$RUNNER_TEMP` names a scratch folder on both CI systems).
    pub(crate) fn install_command(&self) -> String {
        match self {
            OrchSource::Git { url, rev } => {
                format!("cargo install --locked --git '{url}' --rev {rev} orch")
            }
            OrchSource::Binary { url, sha256 } => format!(
                "set -eu\n\
                 curl --proto '=https' --tlsv1.2 -fsSL -o \"$RUNNER_TEMP/orch.download\" '{url}'\n\
                 echo '{sha256}  '\"$RUNNER_TEMP/orch.download\" | sha256sum -c -\n\
                 install -D -m 0755 \"$RUNNER_TEMP/orch.download\" \"${{CARGO_HOME:-$HOME/.cargo}}/bin/orch\"\n\
                 rm -f \"$RUNNER_TEMP/orch.download\""
            ),
        }
    }
}

/// How the export is made.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// The pipeline file as the workflow names it (relative to the
    /// repository root, `/`-separated).
    pub(crate) file: String,
    pub(crate) orch: OrchSource,
    /// The export's other arguments, as a command line gives them: the
    /// header repeats them so `--check` can be run as written.
    pub(crate) flags: String,
}

/// One phase's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Job {
    /// Valid for GitHub and GitLab: `^[_a-zA-Z][a-zA-Z0-9_-]*$`.
    pub(crate) id: String,
    pub(crate) phase: String,
    /// The jobs of its direct dependencies.
    pub(crate) needs: Vec<String>,
    /// Every job upstream of it, in an order that puts dependencies first:
    /// whose state and files it restores.
    pub(crate) upstream: Vec<String>,
    /// An optional phase: its failure does not stop the jobs after it.
    pub(crate) optional: bool,
    /// Some agent of the phase may write the workspace: its changes are
    /// carried to the jobs after it as a patch.
    pub(crate) writes: bool,
    /// Minutes the whole job may take (setup, every attempt, retries and
    /// judge rounds); `None` when the phase sets no timeout.
    pub(crate) timeout_minutes: Option<u64>,
    /// The environment variables the job's agents need from secrets.
    pub(crate) secrets: Vec<String>,
    /// The variables the job's agents read from the job's own environment
    /// (the runner's `PATH`, `HOME`, ..., or one that is no secret): never
    /// set by the step, so the runner's value stands.
    pub(crate) env: Vec<String>,
    /// npm packages (pinned) of the agent CLIs the job runs.
    pub(crate) clis: Vec<String>,
    /// Files the phase produces (declared artifacts), carried downstream.
    pub(crate) files: Vec<String>,
}

/// The name of the final job (merges state, writes the summary), and of
/// the artifact it uploads on GitHub.
pub(crate) const SUMMARY_JOB: &str = "orch-summary";

/// What every phase job's artifact is named after: `orch-job-<job id>`.
/// No name with it can be [`SUMMARY_JOB`]'s, whatever the phase is called,
/// and the summary fetches exactly those (`orch-job-*`).
pub(crate) const ARTIFACT_PREFIX: &str = "orch-job-";

/// Names a job id must not take: the summary job's,
/// and the keys GitLab reads at the top of a pipeline (a job named
/// `variables` would replace the pipeline's variables) or treats apart
/// (`pages` publishes a site).
const RESERVED_IDS: &[&str] = &[
    SUMMARY_JOB,
    "after_script",
    "before_script",
    "cache",
    "default",
    "image",
    "include",
    "pages",
    "services",
    "spec",
    "stages",
    "types",
    "variables",
    "workflow",
];

/// Minutes a job gets for checkout, installs and state transfer.
const SETUP_MINUTES: u64 = 15;

/// The agent CLIs orch is tested with, at their pins, and npm's lock of
/// them (integrity hashes of every package): jobs install from the lock
/// with `npm ci`, never by name alone. The lock is for Linux x64 runners:
/// opencode-ai's packages for other platforms are left out of it.
pub(crate) const CLIS_PACKAGE_LOCK: &str = include_str!("../../ci/agent-clis/package-lock.json");

/// An agent CLI's npm package at its pin (`name@version`).
pub(crate) fn cli_package(kind: AgentKind) -> Option<String> {
    Some(format!(
        "{}@{}",
        kind.npm_package()?,
        kind.pinned_version()?
    ))
}

/// The shell lines that install the pinned CLIs into `dir` from the lock
/// (compacted JSON in quoted here-documents).
pub(crate) fn install_clis_script(dir: &str) -> String {
    let compact = |j: &str| {
        serde_json::from_str::<serde_json::Value>(j)
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    format!(
        "set -eu\nmkdir -p \"{dir}\"\ncat > \"{dir}/package.json\" <<'ORCH_EOF'\n{}\nORCH_EOF\ncat > \"{dir}/package-lock.json\" <<'ORCH_EOF'\n{}\nORCH_EOF\nnpm ci --prefix \"{dir}\" --no-audit --no-fund\n",
        compact(crate::agents::CLIS_PACKAGE_JSON),
        compact(CLIS_PACKAGE_LOCK)
    )
}

/// A variable name a CI secret could stand for.
fn variable_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A variable the runner, its image or the CI system sets in every job
/// (GitHub forbids secrets named `GITHUB_*`; GitLab's own are `CI_*`):
/// read from the job's environment, never made a secret, which would
/// replace the runner's value with an empty one. Case does not matter
/// (neither system's secret names tell `PATH` from `path`).
pub(crate) fn runner_variable(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "TMPDIR",
        "TEMP",
        "TMP",
        "HOSTNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "CI",
        "CARGO_HOME",
        "RUSTUP_HOME",
    ];
    const PREFIXES: &[&str] = &["LC_", "GITHUB_", "RUNNER_", "ACTIONS_", "CI_", "GITLAB_"];
    let n = name.to_ascii_uppercase();
    NAMES.contains(&n.as_str()) || PREFIXES.iter().any(|p| n.starts_with(p))
}

/// Whether `${name}`, met in the value of `carrier` (an agent's or a stdio
/// MCP server's variable, a remote server's header; `None` for a URL),
/// stands for a secret: not the runner's, and its name or its carrier's
/// says credential (`MY_API_KEY`; `ANTHROPIC_API_KEY = "${UPSTREAM}"`;
/// an `Authorization` header). Anything else is read from the job's
/// environment.
fn secret_reference(name: &str, carrier: Option<&str>) -> bool {
    let secret_carrier = |c: &str| {
        crate::agents::env::looks_secret(c)
            || c.eq_ignore_ascii_case("authorization")
            || c.eq_ignore_ascii_case("proxy-authorization")
    };
    !runner_variable(name)
        && (crate::agents::env::looks_secret(name) || carrier.is_some_and(secret_carrier))
}

/// A job id from a phase name: characters outside `[a-zA-Z0-9_-]` become
/// `_`, a leading digit or `-` gets a `_` before it, and a name taken
/// already or reserved ([`RESERVED_IDS`]) gets `_2`, `_3`, ...
pub(crate) fn job_id(name: &str, taken: &[String]) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        id.insert(0, '_');
    }
    let reserved = |s: &str| RESERVED_IDS.contains(&s) || taken.iter().any(|t| t == s);
    if !reserved(&id) {
        return id;
    }
    (2..)
        .map(|n| format!("{id}_{n}"))
        .find(|c| !reserved(c))
        .expect("some suffix is free")
}

/// The pipeline's jobs, in an order that puts dependencies first.
pub(crate) fn jobs(pipeline: &Pipeline, graph: &PhaseGraph) -> Vec<Job> {
    let all: Vec<usize> = (0..pipeline.phases.len()).collect();
    let order: Vec<usize> = graph.stages_of(&all).into_iter().flatten().collect();
    let mut ids: Vec<String> = vec![String::new(); pipeline.phases.len()];
    let mut taken: Vec<String> = Vec::new();
    // Ids in declaration order, so they do not move when stages do.
    for (i, p) in pipeline.phases.iter().enumerate() {
        ids[i] = job_id(&p.name, &taken);
        taken.push(ids[i].clone());
    }
    let mut jobs = Vec::new();
    for &i in &order {
        let phase = &pipeline.phases[i];
        let ancestors: BTreeSet<usize> = graph.ancestors(i).into_iter().collect();
        let upstream = order
            .iter()
            .filter(|j| ancestors.contains(j))
            .map(|&j| ids[j].clone())
            .collect();
        let mut secrets: Vec<String> = Vec::new();
        let mut env: Vec<String> = Vec::new();
        let mut clis: Vec<String> = Vec::new();
        let mut writes = false;
        let mut agents: Vec<&str> = phase.agents.iter().map(String::as_str).collect();
        if let Some(j) = phase.contract.as_ref().and_then(|c| c.judge.as_deref()) {
            agents.push(j);
        }
        for name in agents {
            let Some(agent) = pipeline.agent(name) else {
                continue;
            };
            let resolved = pipeline.resolve(phase, agent);
            let ts = &resolved.toolset;
            writes |= ts.permission != Permission::ReadOnly;
            if let Some(pkg) = cli_package(agent.kind)
                && !clis.contains(&pkg)
            {
                clis.push(pkg);
            }
            for c in agent.kind.credentials() {
                if !secrets.iter().any(|s| s == c) {
                    secrets.push(c.to_string());
                }
            }
            // Each `${NAME}` with the variable or header whose value it is in.
            let mut refs: Vec<(String, Option<&str>)> = Vec::new();
            for (k, v) in &agent.env {
                refs.extend(template_names(v).into_iter().map(|n| (n, Some(k.as_str()))));
            }
            for tool in ts.mcp.iter() {
                let Some(server) = pipeline.mcp_servers.iter().find(|s| s.name == tool.server)
                else {
                    continue;
                };
                let values: Vec<(Option<&str>, &String)> = match &server.transport {
                    crate::pipeline::model::McpTransport::Stdio { env, .. } => {
                        env.iter().map(|(k, v)| (Some(k.as_str()), v)).collect()
                    }
                    crate::pipeline::model::McpTransport::Http { url, headers } => {
                        std::iter::once((None, url))
                            .chain(headers.iter().map(|(k, v)| (Some(k.as_str()), v)))
                            .collect()
                    }
                };
                for (k, v) in values {
                    refs.extend(template_names(v).into_iter().map(|n| (n, k)));
                }
            }
            for (n, carrier) in refs {
                if !variable_name(&n) {
                    continue;
                }
                let list = if secret_reference(&n, carrier) {
                    &mut secrets
                } else {
                    &mut env
                };
                if !list.contains(&n) {
                    list.push(n);
                }
            }
        }
        // A name that is a secret for one agent is one for the job.
        env.retain(|n| !secrets.contains(n));
        env.sort();
        secrets.sort();
        let mut files = phase.artifacts.clone();
        if let Some(c) = &phase.contract {
            // The contract's artifact names the run and phase: the same
            // shell pattern matches it in any run.
            files.push(
                c.artifact
                    .replace("{run}", "*")
                    .replace("{phase}", &phase.name),
            );
        }
        jobs.push(Job {
            id: ids[i].clone(),
            phase: phase.name.clone(),
            needs: graph
                .dependencies(i)
                .into_iter()
                .map(|d| ids[d].clone())
                .collect(),
            upstream,
            optional: !phase.required,
            writes,
            timeout_minutes: timeout_minutes(pipeline, i),
            secrets,
            env,
            clis,
            files,
        });
    }
    jobs
}

/// The `${NAME}` a value refers to.
fn template_names(v: &str) -> Vec<String> {
    crate::agents::env::referenced(&crate::agents::invocation::EnvValue::Template(
        v.to_string(),
    ))
}

/// The most a phase can take: every attempt of every agent at its timeout
/// (side by side when the phase is parallel), a minute of back-off per
/// retry, the judge's turn in each round, plus setup. `None` without a
/// timeout.
fn timeout_minutes(pipeline: &Pipeline, i: usize) -> Option<u64> {
    let phase = &pipeline.phases[i];
    let per_attempt = phase.timeout?.as_secs();
    let tries = 1 + u64::from(phase.retries);
    let per_agent = tries * per_attempt + (tries - 1) * 60;
    let agents = phase.agents.len().max(1) as u64;
    let round = if phase.parallel {
        per_agent
    } else {
        per_agent * agents
    };
    let (rounds, judge) = match &phase.contract {
        Some(c) => (
            u64::from(c.max_attempts),
            if c.judge.is_some() { per_agent } else { 0 },
        ),
        None => (1, 0),
    };
    let secs = rounds * (round + judge);
    Some(secs.div_ceil(60) + SETUP_MINUTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_id_is_never_a_reserved_name() {
        assert_eq!(job_id("orch-summary", &[]), "orch-summary_2");
        assert_eq!(job_id("variables", &[]), "variables_2");
        assert_eq!(job_id("summary", &[]), "summary");
        assert_eq!(job_id("a", &["a".into(), "a_2".into()]), "a_3");
    }

    #[test]
    fn a_reference_is_a_secret_by_its_name_or_its_carrier_never_the_runners() {
        assert!(secret_reference("MY_API_KEY", None));
        assert!(secret_reference("UPSTREAM", Some("OPENAI_API_KEY")));
        assert!(secret_reference("REMOTE", Some("Authorization")));
        assert!(secret_reference("REMOTE", Some("proxy-authorization")));
        assert!(!secret_reference("REMOTE", Some("X-Region")));
        assert!(!secret_reference("ENDPOINT", None));
        for runner in [
            "PATH",
            "path",
            "HOME",
            "TMPDIR",
            "LC_ALL",
            "GITHUB_TOKEN",
            "CI_JOB_TOKEN",
            "RUNNER_TEMP",
            "ACTIONS_RUNTIME_TOKEN",
            "GITLAB_USER_LOGIN",
            "CARGO_HOME",
        ] {
            assert!(runner_variable(runner), "{runner}");
            assert!(!secret_reference(runner, Some("API_KEY")), "{runner}");
        }
    }
}

//! `orch export github-actions|gitlab-ci FILE`: the pipeline as CI jobs,
//! one per phase (see `crate::export`). `--check` compares with a
//! checked-in file instead of writing, so CI can keep it current.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::GlobalArgs;
use super::output::{CmdResult, Exit, load_valid, stdout, usage_error};
use crate::export::github::Trigger;
use crate::export::{self, Options, OrchSource};
use crate::graph::PhaseGraph;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub target: Target,
}

#[derive(Debug, Subcommand)]
pub enum Target {
    /// A GitHub Actions workflow (for .github/workflows/)
    GithubActions(ExportArgs),
    /// A GitLab CI pipeline (for .gitlab-ci.yml)
    GitlabCi(ExportArgs),
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The pipeline file, as the workflow will name it (relative to the
    /// repository root)
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write here instead of standard output
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Write nothing: exit 1 when PATH (`-o`) differs from what would be
    /// written
    #[arg(long, requires = "output")]
    pub check: bool,
    /// What starts the workflow (GitHub; repeatable)
    #[arg(long = "on", value_enum, default_values_t = [Trigger::WorkflowDispatch])]
    pub on: Vec<Trigger>,
    /// Build orch in each job from this git repository (with --orch-rev)
    /// instead of the registry
    #[arg(long, value_name = "URL", requires = "orch_rev")]
    pub orch_git: Option<String>,
    /// The full commit SHA of --orch-git to build
    #[arg(long, value_name = "SHA", requires = "orch_git")]
    pub orch_rev: Option<String>,
}

pub fn run(args: &Args, global: &GlobalArgs, color: bool) -> CmdResult {
    let (a, github) = match &args.target {
        Target::GithubActions(a) => (a, true),
        Target::GitlabCi(a) => (a, false),
    };
    let ctx = match super::config::context(global) {
        Ok(c) => c,
        Err(exit) => return Ok(exit),
    };
    let loaded = match load_valid(&a.file, &ctx.confinement, color)? {
        Ok(l) => l,
        Err(exit) => return Ok(exit),
    };
    let pipeline = loaded.pipeline;
    let Ok(graph) = PhaseGraph::build(&pipeline) else {
        return usage_error("the pipeline has a dependency cycle", None);
    };
    let orch = match (&a.orch_git, &a.orch_rev) {
        (Some(url), Some(rev)) => {
            if rev.len() != 40 || !rev.chars().all(|c| c.is_ascii_hexdigit()) {
                return usage_error(
                    &format!("--orch-rev `{rev}` is not a full commit SHA"),
                    Some("give all 40 hex digits: a branch or tag can move".into()),
                );
            }
            if url.contains(['\'', '\n', '\r']) {
                return usage_error(&format!("--orch-git `{url}` is not a plain URL"), None);
            }
            OrchSource::Git {
                url: url.clone(),
                rev: rev.to_ascii_lowercase(),
            }
        }
        _ => OrchSource::Registry {
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
    };
    if a.file.is_absolute() {
        return usage_error(
            &format!("`{}` is an absolute path", a.file.display()),
            Some("name the pipeline relative to the repository root, as the jobs will".into()),
        );
    }
    let opts = Options {
        file: a
            .file
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string(),
        orch,
    };
    let jobs = export::jobs(&pipeline, &graph);
    let text = if github {
        export::github::render(&opts, &jobs, &pipeline.name, &a.on)
    } else {
        export::gitlab::render(&opts, &jobs, &pipeline.name)
    };
    match (&a.output, a.check) {
        (Some(path), true) => {
            let current = std::fs::read_to_string(path).unwrap_or_default();
            if current == text {
                Ok(Exit::Success)
            } else {
                let _ = writeln!(
                    std::io::stderr(),
                    "error: `{}` is not what `orch export` writes for `{}`\n  help: write it again with the same command without --check",
                    path.display(),
                    a.file.display()
                );
                Ok(Exit::Failed)
            }
        }
        (Some(path), false) => {
            if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(path, text)?;
            Ok(Exit::Success)
        }
        (None, _) => {
            let mut out = stdout();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(Exit::Success)
        }
    }
}

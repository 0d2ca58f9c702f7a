//! `orch export github-actions|gitlab-ci FILE`: the pipeline as CI jobs,
//! one per phase (see `crate::export`). `--check` compares with a
//! checked-in file instead of writing, so CI can keep it current.

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;

use super::GlobalArgs;
use super::error::CliError;
use super::load::{load_pipeline, phase_graph};
use super::output::{Exit, stdout};
use crate::export::github::Trigger;
use crate::export::{self, Options, OrchSource};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) target: Target,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Target {
    /// A GitHub Actions workflow (for .github/workflows/)
    GithubActions(ExportArgs),
    /// A GitLab CI pipeline (for .gitlab-ci.yml)
    GitlabCi(ExportArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// The pipeline file, as the workflow will name it (relative to the
    /// repository root)
    #[arg(value_name = "FILE")]
    pub(crate) file: PathBuf,
    /// Write here instead of standard output
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,
    /// Write nothing: exit 1 when PATH (`-o`) differs from what would be
    /// written
    #[arg(long, requires = "output")]
    pub(crate) check: bool,
    /// What starts the workflow (GitHub; repeatable)
    #[arg(long = "on", value_enum, default_values_t = [Trigger::WorkflowDispatch])]
    pub(crate) on: Vec<Trigger>,
    /// Build orch in each job from this git repository (with --orch-rev)
    #[arg(
        long,
        value_name = "URL",
        requires = "orch_rev",
        conflicts_with = "orch_binary"
    )]
    pub(crate) orch_git: Option<String>,
    /// The full commit SHA of --orch-git to build
    #[arg(long, value_name = "SHA", requires = "orch_git")]
    pub(crate) orch_rev: Option<String>,
    /// Install this Linux x86_64 orch binary (an https URL) in each job
    /// instead of building it (with --orch-sha256)
    #[arg(long, value_name = "URL", requires = "orch_sha256")]
    pub(crate) orch_binary: Option<String>,
    /// The SHA-256 the --orch-binary download must have
    #[arg(long, value_name = "HEX", requires = "orch_binary")]
    pub(crate) orch_sha256: Option<String>,
}

/// The arguments besides FILE, `-o` and `--check` that shape the output,
/// as the header repeats them: from the validated source, each value
/// quoted for a POSIX shell (the line is meant to be pasted).
fn flags(orch: &OrchSource, on: &[Trigger], github: bool) -> String {
    let q = crate::agents::invocation::shell_quote;
    let mut f = vec![match orch {
        OrchSource::Git { url, rev } => format!("--orch-git {} --orch-rev {rev}", q(url)),
        OrchSource::Binary { url, sha256 } => {
            format!("--orch-binary {} --orch-sha256 {sha256}", q(url))
        }
    }];
    if github && on != [Trigger::WorkflowDispatch] {
        for t in on {
            if let Some(v) = clap::ValueEnum::to_possible_value(t) {
                f.push(format!("--on {}", v.get_name()));
            }
        }
    }
    f.join(" ")
}

/// A URL a job may fetch: printable ASCII only (no line separator a YAML
/// reader might honour inside the header's comments), nothing a shell or
/// the single quotes around it would read, and one of `schemes`.
fn safe_url(url: &str, schemes: &[&str]) -> bool {
    schemes.iter().any(|s| url.starts_with(s))
        && url
            .chars()
            .all(|c| c.is_ascii_graphic() && !matches!(c, '\'' | '"' | '\\' | '`' | '$'))
}

/// The pipeline's path as the exported file names it (its header
/// comment, `ORCH_PIPELINE`), or why it cannot be: not UTF-8, a control
/// character or line separator in it, which would end the header's
/// comment line and start YAML of its own, or `${{`, which GitHub would
/// evaluate in `ORCH_PIPELINE`'s value.
fn pipeline_path(file: &std::path::Path) -> Result<&str, String> {
    let Some(text) = file.to_str() else {
        return Err(format!("`{}` is not UTF-8", file.display()));
    };
    if text
        .chars()
        .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err(format!(
            "`{}` has a control character or line break in its name",
            text.escape_debug()
        ));
    }
    if text.contains("${{") {
        return Err(format!(
            "`{text}` has `${{{{` in its name, which GitHub would evaluate as an expression"
        ));
    }
    Ok(text)
}

/// Which orch the jobs install; refused unless pinned (no default: the
/// name `orch` on a public registry is not ours to trust).
fn orch_source(a: &ExportArgs) -> Result<OrchSource, CliError> {
    let refused = |message: String, hint: &str| CliError::usage(message).with_hint(hint);
    let hex = |v: &str, n: usize| v.len() == n && v.chars().all(|c| c.is_ascii_hexdigit());
    match (&a.orch_git, &a.orch_rev, &a.orch_binary, &a.orch_sha256) {
        (Some(url), Some(rev), _, _) => {
            if !hex(rev, 40) {
                return Err(refused(
                    format!("--orch-rev `{rev}` is not a full commit SHA"),
                    "give all 40 hex digits: a branch or tag can move",
                ));
            }
            if !safe_url(url, &["https://", "ssh://"]) {
                return Err(refused(
                    format!(
                        "--orch-git `{}` is not a plain https:// or ssh:// URL",
                        url.escape_debug()
                    ),
                    "printable ASCII without spaces, quotes, `$` or backslashes",
                ));
            }
            Ok(OrchSource::Git {
                url: url.clone(),
                rev: rev.to_ascii_lowercase(),
            })
        }
        (_, _, Some(url), Some(sum)) => {
            if !hex(sum, 64) {
                return Err(refused(
                    format!("--orch-sha256 `{sum}` is not a SHA-256"),
                    "give the 64 hex digits `sha256sum` prints for the binary",
                ));
            }
            if !safe_url(url, &["https://"]) {
                return Err(refused(
                    format!(
                        "--orch-binary `{}` is not a plain https URL",
                        url.escape_debug()
                    ),
                    "the jobs download it with curl --proto '=https'",
                ));
            }
            Ok(OrchSource::Binary {
                url: url.clone(),
                sha256: sum.to_ascii_lowercase(),
            })
        }
        _ => Err(refused(
            "say which orch the jobs install".into(),
            "pin a build: --orch-git URL --orch-rev <full commit SHA> (built with cargo in each job), \
             or --orch-binary https://… --orch-sha256 <hex> (a Linux x86_64 binary, checked before it runs)",
        )),
    }
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let (a, github) = match &args.target {
        Target::GithubActions(a) => (a, true),
        Target::GitlabCi(a) => (a, false),
    };
    if !github && a.on != [Trigger::WorkflowDispatch] {
        return Err(CliError::usage("--on is for GitHub Actions").with_hint(
            "a GitLab pipeline runs on the project's pipeline triggers (`workflow:` rules)",
        ));
    }
    let orch = orch_source(a)?;
    let file = pipeline_path(&a.file).map_err(|message| {
        CliError::usage(message).with_hint(
            "rename the pipeline file: the exported file names it in a comment and a variable",
        )
    })?;
    let (_, pipeline) = load_pipeline(global, Some(&a.file), color)?;
    let graph = phase_graph(&pipeline)?;
    if a.file.is_absolute() {
        return Err(
            CliError::usage(format!("`{}` is an absolute path", a.file.display()))
                .with_hint("name the pipeline relative to the repository root, as the jobs will"),
        );
    }
    let opts = Options {
        file: file.trim_start_matches("./").to_string(),
        flags: flags(&orch, &a.on, github),
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
                Err(CliError::failed(format!(
                    "`{}` is not what `orch export` writes for `{}`",
                    path.display(),
                    a.file.display()
                ))
                .with_hint("write it again with the same command without --check"))
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

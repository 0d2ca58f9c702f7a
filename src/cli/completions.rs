//! `orch completions SHELL` and `orch man`: shell completions and man
//! pages, generated from the same argument definitions as the parser, so
//! they cannot fall behind it.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use super::error::CliError;
use super::output::{Exit, stdout};

#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, powershell or elvish
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: Shell,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ManArgs {
    /// Write one page per command (orch.1, orch-run.1, orch-runs-show.1,
    /// ...) into DIR instead of printing orch.1
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

pub(super) fn completions(args: &CompletionsArgs) -> Result<Exit, CliError> {
    let mut cmd = super::Cli::command();
    let mut out = stdout();
    clap_complete::generate(args.shell, &mut cmd, "orch", &mut out);
    out.flush()?;
    Ok(Exit::Success)
}

pub(super) fn man(args: &ManArgs) -> Result<Exit, CliError> {
    let mut cmd = super::Cli::command();
    cmd.build();
    match &args.dir {
        None => {
            let mut out = stdout();
            page(cmd).render(&mut out)?;
            out.flush()?;
        }
        Some(dir) => {
            if let Err(e) = std::fs::create_dir_all(dir).and_then(|()| write_pages(&cmd, dir)) {
                return Err(CliError::usage(format!(
                    "cannot write man pages in `{}`: {e}",
                    dir.display()
                )));
            }
        }
    }
    Ok(Exit::Success)
}

/// A page for `cmd` and for each visible subcommand, each named after
/// its path (`orch.1`, `orch-runs-show.1`); `cmd` must be built.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name());
    let mut page = Vec::new();
    self::page(cmd.clone()).render(&mut page)?;
    std::fs::write(dir.join(format!("{name}.1")), page)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() != "help" {
            write_pages(sub, dir)?;
        }
    }
    Ok(())
}

/// One command's page; every page's footer names orch and its version
/// (not the subcommand's name).
fn page(cmd: clap::Command) -> clap_mangen::Man {
    clap_mangen::Man::new(cmd).source(format!("orch {}", env!("CARGO_PKG_VERSION")))
}

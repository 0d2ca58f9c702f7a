//! `orch learnings search QUERY`: the learnings agents recorded in every
//! run of this state directory, ranked as agents' `search_learnings` ranks
//! them (BM25 over pattern, context and what it applies to, scaled by the
//! quality score).

use std::io::{self, Write};

use clap::Subcommand;

use super::GlobalArgs;
use super::error::CliError;
use super::output::{Exit, Format, stdout, write_json};
use crate::report::{github, text};
use crate::store::Reader;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: LearningsCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum LearningsCommand {
    /// Learnings that match any word of QUERY, best first
    Search(SearchArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// Words to look for
    #[arg(value_name = "QUERY")]
    pub(crate) query: String,
    /// At most this many
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub(crate) limit: usize,
    /// Only learnings with at least this quality score (they start at 50)
    #[arg(long, value_name = "SCORE", default_value_t = 0)]
    pub(crate) min_quality: i64,
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: Format,
}

pub(super) fn run(args: &Args, global: &GlobalArgs) -> Result<Exit, CliError> {
    let ctx = super::config::context(global)?;
    let LearningsCommand::Search(a) = &args.command;
    let found = match Reader::open(&ctx.state_dir())? {
        Some(r) => r.search_learnings(&a.query, a.limit, a.min_quality)?,
        None => Vec::new(),
    };
    match a.format {
        Format::Json => write_json(&found)?,
        Format::Text if found.is_empty() => {
            let _ = writeln!(
                io::stderr(),
                "no learning matches `{}` in `{}`",
                a.query,
                ctx.state_dir().display()
            );
        }
        Format::Text => {
            let mut out = stdout();
            // Agents wrote them: each on one line, nothing a terminal
            // acts on, and into a GitHub log as text only.
            github::text_only(&mut out, github::stdout_is_log(), |out| {
                for l in &found {
                    writeln!(out, "{}", text::line(&super::reports::learning(l)))?;
                    if !l.context.is_empty() {
                        writeln!(out, "    {}", text::line(&l.context))?;
                    }
                }
                Ok(())
            })?;
            out.flush()?;
        }
    }
    Ok(Exit::Success)
}

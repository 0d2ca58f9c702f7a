//! `orch prompt FILE --phase P --agent A`: the system and user prompts of
//! one invocation exactly as they would be sent, with the size of each
//! system layer and of the task in tokens (4 characters a token), and the
//! layers left out.

use std::io::Write;
use std::path::PathBuf;

use serde::Serialize;

use super::GlobalArgs;
use super::error::CliError;
use super::load::load_pipeline;
use super::output::{Exit, Format, stdout, write_json};
use crate::catalog::OMITTABLE;
use crate::engine::assemble;
use crate::prompt::{Layer, tokens};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The pipeline file (default: `pipeline.toml` here, else the only
    /// file in `pipelines/` or `.orch/pipelines/`)
    #[arg(value_name = "FILE")]
    pub(crate) file: Option<PathBuf>,
    #[arg(long, value_name = "PHASE")]
    pub(crate) phase: String,
    #[arg(long, value_name = "AGENT")]
    pub(crate) agent: String,
    /// As the next attempt in this recorded run would get it (its findings,
    /// comments, earlier attempts): a run id, a unique prefix, or `latest`
    #[arg(long, value_name = "RUN")]
    pub(crate) run: Option<String>,
    /// A value for `{{inputs.NAME}}` (repeatable), as `orch run` takes it
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = super::run::parse_input)]
    pub(crate) inputs: Vec<(String, String)>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
}

#[derive(Serialize)]
struct LayerJson<'a> {
    name: &'a str,
    tokens: usize,
    text: &'a str,
}

#[derive(Serialize)]
struct PromptJson<'a> {
    phase: &'a str,
    agent: &'a str,
    system: Option<&'a str>,
    system_tokens: usize,
    layers: Vec<LayerJson<'a>>,
    /// Layers the profile leaves out (`omit`).
    omitted: Vec<&'a str>,
    user: &'a str,
    user_tokens: usize,
    /// The context sections in `user` (each within its share of the
    /// budget; `truncated` when cut).
    sections: &'a [crate::prompt::budget::Section],
}

pub(super) fn run(args: &Args, global: &GlobalArgs, color: bool) -> Result<Exit, CliError> {
    let (mut ctx, pipeline) = load_pipeline(global, args.file.as_deref(), color)?;
    ctx.inputs = args.inputs.iter().cloned().collect();
    let p = &pipeline;
    let Some(phase) = p.phase(&args.phase) else {
        let names: Vec<&str> = p.phases.iter().map(|x| x.name.as_str()).collect();
        return Err(CliError::usage(format!("no phase `{}`", args.phase))
            .with_hint(format!("phases: {}", names.join(", "))));
    };
    // The phase's own agents, or its judge (which runs as the phase in
    // review mode, with the artifact in its prompt once there is one).
    let judged = phase.judge_preview().filter(|j| j.agents[0] == args.agent);
    let phase = judged.as_ref().unwrap_or(phase);
    let Some(agent) = phase
        .agents
        .contains(&args.agent)
        .then(|| p.agent(&args.agent))
        .flatten()
    else {
        return Err(CliError::usage(format!(
            "phase `{}` has no agent `{}`",
            phase.name, args.agent
        ))
        .with_hint(format!("its agents: {}", phase.agents.join(", "))));
    };
    let dir = ctx.planned_dir(&phase.name, &agent.name);
    let run_id = match &args.run {
        None => None,
        Some(spec) => {
            let found = crate::store::Reader::open(&ctx.state_dir())
                .ok()
                .flatten()
                .and_then(|r| r.resolve_run(spec).ok().flatten());
            match found {
                Some(id) => Some(id),
                None => {
                    return Err(CliError::usage(format!(
                        "no run `{spec}` in `{}`",
                        ctx.state_dir().display()
                    ))
                    .with_hint("`orch runs list` shows the recorded runs"));
                }
            }
        }
    };
    let mut slot = assemble::Slot::preview(&dir);
    if let Some(id) = &run_id {
        slot.run_id = id;
    }
    slot.judging = judged.is_some();
    let prompts = assemble::prompts(p, phase, agent, &ctx, &slot);
    let omitted: Vec<&str> = phase
        .profile
        .iter()
        .flat_map(|pr| &pr.omit)
        .map(String::as_str)
        .filter(|o| OMITTABLE.contains(o))
        .collect();
    let layers: Vec<LayerJson> = prompts
        .layers
        .iter()
        .map(|l: &Layer| LayerJson {
            name: l.name,
            tokens: tokens(&l.text),
            text: &l.text,
        })
        .collect();
    let out_json = PromptJson {
        phase: &phase.name,
        agent: &agent.name,
        system: prompts.system.as_deref(),
        system_tokens: prompts.system.as_deref().map_or(0, tokens),
        layers,
        omitted,
        user: &prompts.user,
        user_tokens: tokens(&prompts.user),
        sections: &prompts.sections,
    };
    match args.format {
        Format::Json => write_json(&out_json)?,
        Format::Text => {
            let mut out = stdout();
            writeln!(out, "system prompt ({} tokens)", out_json.system_tokens)?;
            for l in &out_json.layers {
                writeln!(out, "--- {} ({} tokens)", l.name, l.tokens)?;
                writeln!(out, "{}", l.text)?;
            }
            for o in &out_json.omitted {
                writeln!(out, "--- {o}: left out by the profile")?;
            }
            writeln!(out, "\nuser prompt ({} tokens)", out_json.user_tokens)?;
            for s in out_json.sections {
                let cut = if s.truncated { ", truncated" } else { "" };
                writeln!(out, "  section {}: {} tokens{cut}", s.name, s.tokens)?;
            }
            writeln!(out, "{}", out_json.user)?;
            out.flush()?;
        }
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use crate::prompt::tokens;

    #[test]
    fn four_characters_a_token_rounded_up() {
        assert_eq!(tokens(""), 0);
        assert_eq!(tokens("abcd"), 1);
        assert_eq!(tokens("abcde"), 2);
        assert_eq!(tokens("éééé"), 1, "characters, not bytes");
    }
}

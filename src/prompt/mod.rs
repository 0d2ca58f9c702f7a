//! What each attempt is told: its system prompt and its user prompt, built
//! here from the phase (and, as the run's records grow, from them). The
//! adapters only choose how to deliver them to their CLI.

pub(crate) mod budget;
pub(crate) mod context;
pub(crate) mod learnings;
pub(crate) mod system;

pub(crate) use system::{Facts, Layer};

use std::collections::BTreeMap;

use crate::pipeline::template::{self, Meaning};
use crate::pipeline::{Phase, Pipeline};

/// What prompt variables stand for in one attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Vars<'a> {
    pub(crate) run_id: &'a str,
    /// `orch run --input name=value`.
    pub(crate) inputs: &'a BTreeMap<String, String>,
    /// Why the judge rejected the previous round, for the next one.
    pub(crate) feedback: Option<&'a str>,
}

/// Tokens in `text`, at 4 characters a token (rounded up).
pub(crate) fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The size of what an attempt was sent, kept with the attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Tokens {
    pub(crate) system: usize,
    pub(crate) user: usize,
    /// Each system layer's size, in order.
    pub(crate) layers: Vec<(String, usize)>,
    /// Each context section's size, in order.
    #[serde(default)]
    pub(crate) sections: Vec<(String, usize)>,
}

/// The prompts of one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Prompts {
    /// The agent's identity and rules (`None`: the CLI's own): the
    /// `layers`, joined.
    pub(crate) system: Option<String>,
    /// The system prompt's layers, in order.
    pub(crate) layers: Vec<Layer>,
    /// The task: the phase's prompt, the context sections, and a judge's
    /// rejection of the previous round.
    pub(crate) user: String,
    /// The context sections in `user`, as budgeted.
    pub(crate) sections: Vec<budget::Section>,
}

impl Prompts {
    /// The prompts of `phase`: its own prompt, with its profile's body as
    /// the system prompt; a phase with a profile and no prompt of its own
    /// gets the profile's body as the task. Variables are filled from
    /// `vars` (an input not given stays as written: only previews, since
    /// `orch run` refuses to start without it).
    pub(crate) fn of(pipeline: &Pipeline, phase: &Phase, vars: Vars<'_>) -> Prompts {
        Self::with_facts(pipeline, phase, vars, Facts::default())
    }

    /// [`Prompts::of`], with the system prompt's layers made from `facts`
    /// (the workspace, the project's instructions, learnings).
    pub(crate) fn with_facts(
        pipeline: &Pipeline,
        phase: &Phase,
        vars: Vars<'_>,
        facts: Facts<'_>,
    ) -> Prompts {
        let fill = |text: &str| {
            template::render(text, |m| {
                Some(match m {
                    Meaning::RunId => vars.run_id.to_string(),
                    Meaning::Phase => phase.name.clone(),
                    Meaning::Artifacts(p) => pipeline
                        .phase(p)
                        .map(|x| x.artifacts.join(", "))
                        .unwrap_or_default(),
                    Meaning::Input(n) => vars
                        .inputs
                        .get(*n)
                        .cloned()
                        .unwrap_or_else(|| format!("{{{{inputs.{n}}}}}")),
                })
            })
            // Validation refused unknown variables: nothing is left to fail.
            .unwrap_or_else(|_| text.to_string())
        };
        let profile = phase
            .profile
            .as_ref()
            .map(|p| fill(&p.body))
            .filter(|b| !b.trim().is_empty());
        let (system_body, user) = match &phase.prompt {
            Some(p) => (profile, fill(p.text())),
            None => (None, profile.unwrap_or_default()),
        };
        let facts = Facts {
            run_id: vars.run_id,
            ..facts
        };
        let layers = system::layers(phase, system_body, facts);
        let system = (!layers.is_empty()).then(|| {
            layers
                .iter()
                .map(|l| l.text.as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        });
        let mut user = user;
        for s in facts.sections {
            user = format!(
                "{}\n\n## {}\n\n{}",
                user.trim_end(),
                budget::title(s.name),
                s.text
            );
        }
        let mut prompts = Prompts {
            system,
            layers,
            user,
            sections: facts.sections.to_vec(),
        };
        if let Some(f) = vars.feedback {
            prompts.user = format!("{}\n\n{f}", prompts.user.trim_end());
        }
        prompts
    }

    /// The inputs the prompts of `phase` use.
    pub(crate) fn inputs_used(phase: &Phase) -> Vec<String> {
        let texts = phase
            .prompt
            .as_ref()
            .map(|p| p.text())
            .into_iter()
            .chain(phase.profile.as_ref().map(|p| p.body.as_str()));
        let mut out: Vec<String> = texts
            .flat_map(template::variables)
            .filter_map(|v| match template::meaning(&v.name) {
                Ok(Meaning::Input(n)) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The size of each part.
    pub(crate) fn tokens(&self) -> Tokens {
        Tokens {
            system: self.system.as_deref().map_or(0, tokens),
            user: tokens(&self.user),
            layers: self
                .layers
                .iter()
                .map(|l| (l.name.to_string(), tokens(&l.text)))
                .collect(),
            sections: self
                .sections
                .iter()
                .map(|s| (s.name.to_string(), s.tokens))
                .collect(),
        }
    }

    /// Both in one text, for a CLI with no way to take a system prompt
    /// for one run: the system prompt first, set apart.
    pub(crate) fn joined(&self) -> String {
        match &self.system {
            Some(system) => format!("{system}\n\n---\n\n{}", self.user),
            None => self.user.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_prompt_is_set_apart_when_joined() {
        let p = Prompts {
            system: Some("You audit.".into()),
            user: "Audit src/.".into(),
            ..Default::default()
        };
        assert_eq!(p.joined(), "You audit.\n\n---\n\nAudit src/.");
        let bare = Prompts {
            system: None,
            user: "Do it.".into(),
            ..Default::default()
        };
        assert_eq!(bare.joined(), "Do it.");
    }
}

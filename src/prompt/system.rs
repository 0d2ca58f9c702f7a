//! The system prompt, in layers, in this order: the workspace boundary,
//! the profile's body, the phase's contract, the project's instructions for
//! the profile (`instructions` in `orch.toml`), and convention learnings
//! relevant to the phase (at most [`MAX_LEARNING_CHARS`], most relevant
//! first). A profile may leave out the last two (`omit`); the boundary,
//! the contract and the profile are always there.

use std::path::Path;

use serde::Serialize;

use crate::pipeline::Phase;
use crate::pipeline::model::Validation;

/// The most characters of convention learnings in a system prompt.
pub(crate) const MAX_LEARNING_CHARS: usize = 1_500;

/// One layer of a system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Layer {
    /// `boundary`, `profile`, `contract`, `instructions`, `learnings`.
    pub(crate) name: &'static str,
    pub(crate) text: String,
}

/// What the layers are made from, besides the phase.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts<'a> {
    pub(crate) workdir: Option<&'a Path>,
    pub(crate) branch: Option<&'a str>,
    pub(crate) run_id: &'a str,
    /// The project's instructions for the phase's profile.
    pub(crate) instructions: Option<&'a str>,
    /// Convention learnings, most relevant first.
    pub(crate) learnings: &'a [String],
    /// The user prompt's context sections, budgeted.
    pub(crate) sections: &'a [super::budget::Section],
}

/// The layers of `phase`'s system prompt; `profile_body` is the profile's
/// body when it is the system prompt's (the phase has its own task).
pub(crate) fn layers(phase: &Phase, profile_body: Option<String>, f: Facts<'_>) -> Vec<Layer> {
    let omitted = |name: &str| {
        phase
            .profile
            .as_ref()
            .is_some_and(|p| p.omit.iter().any(|o| o == name))
    };
    let mut out = Vec::new();
    if let Some(dir) = f.workdir {
        let branch = match f.branch {
            Some(b) => format!(" on branch `{b}`"),
            None => String::new(),
        };
        out.push(Layer {
            name: "boundary",
            text: format!(
                "You work in `{}`{branch}. Before anything else, check that this is where you are (`pwd`{}); work only there.",
                dir.display(),
                if f.branch.is_some() { ", `git branch --show-current`" } else { "" }
            ),
        });
    }
    if let Some(body) = profile_body {
        out.push(Layer {
            name: "profile",
            text: body.trim().to_string(),
        });
    }
    if let Some(c) = &phase.contract {
        let path = c.artifact_path(f.run_id, &phase.name);
        let mut text = format!("This phase must deliver `{path}`, a Markdown file");
        if c.required_sections.is_empty() {
            text.push('.');
        } else {
            let s: Vec<String> = c
                .required_sections
                .iter()
                .map(|s| format!("`## {s}`"))
                .collect();
            text.push_str(&format!(" with the sections {}.", s.join(", ")));
        }
        text.push_str(match c.validation {
            Validation::Structural => " orch checks that it is there with those sections.",
            Validation::Judge => {
                " orch checks it, then an independent judge approves it or sends it back."
            }
            Validation::Trust => " orch checks it but only warns.",
        });
        text.push_str(" When it is done, call orch's `complete_phase` with its path and SHA-256 if you have that tool.");
        out.push(Layer {
            name: "contract",
            text,
        });
    }
    if let Some(i) = f.instructions.filter(|i| !i.trim().is_empty())
        && !omitted("instructions")
    {
        out.push(Layer {
            name: "instructions",
            text: i.trim().to_string(),
        });
    }
    if !f.learnings.is_empty() && !omitted("learnings") {
        let mut text = String::from("Conventions learned in earlier runs:\n");
        for l in f.learnings {
            let line = format!("- {}\n", l.trim());
            if text.len() + line.len() > MAX_LEARNING_CHARS {
                break;
            }
            text.push_str(&line);
        }
        if text.lines().count() > 1 {
            out.push(Layer {
                name: "learnings",
                text: text.trim_end().to_string(),
            });
        }
    }
    out
}

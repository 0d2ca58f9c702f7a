//! What each attempt is told: its system prompt and its user prompt, built
//! here from the phase (and, as the run's records grow, from them). The
//! adapters only choose how to deliver them to their CLI.

use crate::pipeline::Phase;

/// The prompts of one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prompts {
    /// The agent's identity and rules (`None`: the CLI's own).
    pub system: Option<String>,
    /// The task.
    pub user: String,
}

impl Prompts {
    /// The prompts of `phase`: its own prompt, with its profile's body as
    /// the system prompt; a phase with a profile and no prompt of its own
    /// gets the profile's body as the task.
    pub fn of(phase: &Phase) -> Prompts {
        let profile = phase
            .profile
            .as_ref()
            .map(|p| p.body.clone())
            .filter(|b| !b.trim().is_empty());
        match &phase.prompt {
            Some(p) => Prompts {
                system: profile,
                user: p.text().to_string(),
            },
            None => Prompts {
                system: None,
                user: profile.unwrap_or_default(),
            },
        }
    }

    /// Both in one text, for a CLI with no way to take a system prompt
    /// for one run: the system prompt first, set apart.
    pub fn joined(&self) -> String {
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
        };
        assert_eq!(p.joined(), "You audit.\n\n---\n\nAudit src/.");
        let bare = Prompts {
            system: None,
            user: "Do it.".into(),
        };
        assert_eq!(bare.joined(), "Do it.");
    }
}

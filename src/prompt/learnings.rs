//! The convention learnings a phase's system prompt carries: those of every
//! run that match the phase's words best (the same ranking as
//! `search_learnings`: BM25 weighted by quality), conventions only.

use crate::pipeline::Phase;
use crate::store::Reader;

/// How many candidates are ranked before the character budget applies.
const CANDIDATES: usize = 20;

/// The patterns of the convention learnings most relevant to `phase`,
/// best first (none when there is no history yet).
pub(crate) fn conventions(history: Option<&Reader>, phase: &Phase) -> Vec<String> {
    let Some(reader) = history else {
        return Vec::new();
    };
    let query = format!(
        "{} {}",
        phase.name.replace(['-', '_'], " "),
        phase.prompt.as_ref().map(|p| p.text()).unwrap_or("")
    );
    reader
        .search_learnings(&query, CANDIDATES, 0)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.learning_type == "convention")
        .map(|l| l.pattern)
        .collect()
}

/// The most tactical learnings a user prompt carries.
pub(crate) const MAX_TACTICAL: usize = 25;

/// What a phase is about, for scoring learnings against it.
#[derive(Debug, Clone, Default)]
pub(crate) struct About {
    /// Words naming the phase: its name's parts, its mode, its profile.
    pub(crate) labels: Vec<String>,
    /// Paths its prompt mentions.
    pub(crate) paths: Vec<String>,
    /// The prompt's words.
    pub(crate) words: Vec<String>,
}

impl About {
    pub(crate) fn of(phase: &Phase, prompt: &str) -> About {
        let mut labels: Vec<String> = phase
            .name
            .split(['-', '_'])
            .map(str::to_lowercase)
            .collect();
        labels.push(phase.mode.to_string());
        if let Some(p) = &phase.profile {
            labels.push(p.name.to_lowercase());
        }
        let paths = prompt
            .split(|c: char| c.is_whitespace() || "`'\"(),;".contains(c))
            .filter(|w| w.contains('/') && !w.contains("://"))
            .map(|w| w.trim_end_matches(['.', ':']).to_string())
            .collect();
        About {
            labels,
            paths,
            words: words(prompt),
        }
    }
}

/// The lower-case words of `text` of three letters or more.
fn words(text: &str) -> Vec<String> {
    let mut w: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect();
    w.sort();
    w.dedup();
    w
}

/// A learning's score for a phase, from 0 to 1: label overlap 35%, path
/// match 30%, keyword overlap 20%, recency 15% (linear over 90 days).
pub(crate) fn score(l: &crate::store::LearningRow, about: &About, now_ms: u64) -> f64 {
    let age_days = now_ms.saturating_sub(l.ts_ms) as f64 / 86_400_000.0;
    let recency = (1.0 - age_days / 90.0).max(0.0);
    relevance(l, about) + 0.15 * recency
}

/// The part of [`score`] that says the learning is about the phase.
fn relevance(l: &crate::store::LearningRow, about: &About) -> f64 {
    let targets: Vec<String> = l
        .applies_to
        .split([',', ' '])
        .map(|s| s.trim().to_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    let (paths, labels): (Vec<&String>, Vec<&String>) = targets
        .iter()
        .partition(|t| t.contains('/') || t.contains('.'));
    let label = if labels.is_empty() {
        0.0
    } else {
        labels.iter().filter(|t| about.labels.contains(t)).count() as f64 / labels.len() as f64
    };
    let path = paths.iter().any(|p| {
        let p = p.trim_end_matches("**").trim_end_matches('*');
        about
            .paths
            .iter()
            .any(|q| q.to_lowercase().starts_with(p) || p.starts_with(&q.to_lowercase()))
    });
    let mine = words(&l.pattern);
    let keyword = if mine.is_empty() {
        0.0
    } else {
        mine.iter().filter(|w| about.words.contains(w)).count() as f64 / mine.len() as f64
    };
    0.35 * label + 0.30 * f64::from(u8::from(path)) + 0.20 * keyword
}

/// Up to [`MAX_TACTICAL`] of `all` (gotchas and patterns, not conventions:
/// those are in the system prompt) that are about `about` at all, best
/// first; a learning with the same words as a better one, or whose words
/// are inside a longer one's, is left out.
pub(crate) fn tactical(
    all: &[crate::store::LearningRow],
    about: &About,
    now_ms: u64,
) -> Vec<String> {
    let mut scored: Vec<(f64, &crate::store::LearningRow)> = all
        .iter()
        .filter(|l| l.learning_type != "convention" && relevance(l, about) > 0.0)
        .map(|l| (score(l, about, now_ms), l))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.id.cmp(&a.1.id)));
    let norms: Vec<String> = scored
        .iter()
        .map(|(_, l)| crate::store::normalize(&l.pattern))
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut kept: Vec<&String> = Vec::new();
    for (i, (_, l)) in scored.iter().enumerate() {
        let n = &norms[i];
        let inside_longer = norms
            .iter()
            .any(|m| m.len() > n.len() && m.contains(n.as_str()));
        if inside_longer || kept.contains(&n) {
            continue;
        }
        kept.push(n);
        out.push(l.pattern.clone());
        if out.len() == MAX_TACTICAL {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LearningRow;

    fn row(id: i64, kind: &str, pattern: &str, applies_to: &str, days_old: u64) -> LearningRow {
        LearningRow {
            id,
            run_id: "r".into(),
            phase: "p".into(),
            agent: "a".into(),
            ts_ms: NOW - days_old * 86_400_000,
            learning_type: kind.into(),
            pattern: pattern.into(),
            context: String::new(),
            applies_to: applies_to.into(),
            quality: 50,
        }
    }

    const NOW: u64 = 200 * 86_400_000;

    fn about() -> About {
        About {
            labels: vec!["fix".into(), "auth".into()],
            paths: vec!["src/auth/login.rs".into()],
            words: words("Fix the login timeout in src/auth/login.rs"),
        }
    }

    #[test]
    fn each_part_of_the_score_has_its_weight() {
        let a = about();
        let s = |l: &LearningRow| (score(l, &a, NOW) * 1000.0).round() / 1000.0;
        // Label only (1 of 1), 90 days old: 0.35.
        assert_eq!(s(&row(1, "gotcha", "zzz", "auth", 90)), 0.35);
        // Path only, brand new: 0.30 + 0.15.
        assert_eq!(s(&row(2, "gotcha", "zzz", "src/auth/", 0)), 0.45);
        // Half the words shared ("login", not "flaky"), 45 days: 0.10 + 0.075.
        assert_eq!(s(&row(3, "gotcha", "login flaky", "", 45)), 0.175);
    }

    #[test]
    fn tactical_learnings_are_ranked_deduplicated_and_capped() {
        let a = about();
        let mut all = vec![
            row(
                1,
                "convention",
                "Every login change needs a test",
                "auth",
                0,
            ),
            row(
                2,
                "gotcha",
                "The login timeout is read from AUTH_TIMEOUT",
                "auth src/auth/",
                1,
            ),
            row(
                3,
                "gotcha",
                "login timeout is read from AUTH_TIMEOUT",
                "auth",
                2,
            ),
            row(
                4,
                "pattern",
                "Unrelated pattern about billing",
                "billing",
                0,
            ),
            row(
                5,
                "pattern",
                "Login errors are wrapped in AuthError",
                "src/auth/",
                10,
            ),
        ];
        let got = tactical(&all, &a, NOW);
        assert_eq!(
            got,
            [
                "The login timeout is read from AUTH_TIMEOUT",
                "Login errors are wrapped in AuthError"
            ]
        );
        all.extend(
            (10..60).map(|i| row(i, "gotcha", &format!("auth gotcha number {i}"), "auth", 0)),
        );
        assert_eq!(tactical(&all, &a, NOW).len(), MAX_TACTICAL);
    }
}

//! Where a value came from in a file, and the spelling help every error
//! about a name gives.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// A position in a file, kept in the span-free model so provenance and late
/// errors can still say `path:line:col`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Location {
    pub(crate) path: Arc<str>,
    pub(crate) line: usize,
    pub(crate) column: usize,
    #[serde(skip)]
    pub(crate) offset: usize,
    #[serde(skip)]
    pub(crate) len: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.path, self.line, self.column)
    }
}

/// The closest candidate to `word`, if any is close enough to be a likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        let score = strsim::jaro_winkler(&word.to_lowercase(), &candidate.to_lowercase());
        if score >= 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, c)| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_only_for_close_words() {
        assert_eq!(
            suggest("depend_on", ["depends_on", "agents"]),
            Some("depends_on".into())
        );
        assert_eq!(suggest("zzz", ["depends_on", "agents"]), None);
    }
}

//! Where a value came from in a file, and the spelling help every error
//! about a name gives.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

/// A position in a file, kept in the span-free model so provenance and late
/// errors can still say `path:line:col`. Numbers are 32 bits (a pipeline
/// keeps several locations per phase); a position past 4 GiB reads as the
/// largest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Location {
    pub(crate) path: Arc<str>,
    pub(crate) line: u32,
    pub(crate) column: u32,
    #[serde(skip)]
    pub(crate) offset: u32,
    #[serde(skip)]
    pub(crate) len: u32,
}

impl Location {
    /// A location in `path` from 1-based line and column and a byte span.
    pub(crate) fn new(
        path: Arc<str>,
        (line, column): (usize, usize),
        span: &Range<usize>,
    ) -> Location {
        let narrow = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Location {
            path,
            line: narrow(line),
            column: narrow(column),
            offset: narrow(span.start),
            len: narrow(span.end.saturating_sub(span.start)),
        }
    }

    /// The bytes of its file it points at.
    pub(crate) fn span(&self) -> Range<usize> {
        let start = self.offset as usize;
        start..start + self.len as usize
    }
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

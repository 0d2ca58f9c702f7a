//! The index of a workspace's project documents (`search_knowledge`):
//! Markdown files cut into sections at their headings, in FTS5, kept per
//! workspace and brought up to date from the files' hashes before each
//! search, so an edited document is found as it is now.

use rusqlite::{TransactionBehavior, params};
use serde::Serialize;

use super::StoreError;
use super::reports::{Reports, fts_query};

/// A document as it is on disk now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Document {
    /// Relative to the workspace.
    pub(crate) path: String,
    pub(crate) sha256: String,
}

/// One section of a document: its heading (the file name before the first
/// heading) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    pub(crate) heading: String,
    pub(crate) body: String,
}

/// A section that matched, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KnowledgeHit {
    pub(crate) path: String,
    pub(crate) heading: String,
    /// The matching words in context, marked `[...]`.
    pub(crate) snippet: String,
}

/// What [`Reports::sync_knowledge`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct SyncCount {
    pub(crate) indexed: usize,
    pub(crate) removed: usize,
}

impl Reports {
    /// Bring the index of `workspace` to `now`: a document whose hash
    /// changed (or that is new) is read with `sections` and indexed again,
    /// one that is gone is dropped. One transaction, so servers indexing
    /// the same workspace at once leave one copy of each section.
    pub(crate) fn sync_knowledge(
        &self,
        workspace: &str,
        now: &[Document],
        sections: impl Fn(&str) -> Option<Vec<Section>>,
    ) -> Result<SyncCount, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let known: Vec<(String, String)> = {
            let mut st =
                tx.prepare_cached("SELECT path, sha256 FROM knowledge_files WHERE workspace = ?1")?;
            st.query_map([workspace], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?
        };
        let mut count = SyncCount::default();
        let drop_doc = |path: &str| -> Result<(), StoreError> {
            tx.execute(
                "DELETE FROM knowledge_fts WHERE workspace = ?1 AND path = ?2",
                params![workspace, path],
            )?;
            tx.execute(
                "DELETE FROM knowledge_files WHERE workspace = ?1 AND path = ?2",
                params![workspace, path],
            )?;
            Ok(())
        };
        for (path, _) in &known {
            if !now.iter().any(|d| &d.path == path) {
                drop_doc(path)?;
                count.removed += 1;
            }
        }
        for doc in now {
            if known
                .iter()
                .any(|(p, h)| *p == doc.path && *h == doc.sha256)
            {
                continue;
            }
            drop_doc(&doc.path)?;
            let Some(parts) = sections(&doc.path) else {
                continue;
            };
            for s in parts {
                tx.execute(
                    "INSERT INTO knowledge_fts (workspace, path, heading, body) VALUES (?1, ?2, ?3, ?4)",
                    params![workspace, doc.path, s.heading, s.body],
                )?;
            }
            tx.execute(
                "INSERT INTO knowledge_files (workspace, path, sha256) VALUES (?1, ?2, ?3)",
                params![workspace, doc.path, doc.sha256],
            )?;
            count.indexed += 1;
        }
        tx.commit()?;
        Ok(count)
    }

    /// Sections of `workspace`'s documents matching any word of `query`,
    /// ranked by BM25 (a heading weighs twice the text), at most `limit`.
    pub(crate) fn search_knowledge(
        &self,
        workspace: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<KnowledgeHit>, StoreError> {
        let Some(fts) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT path, heading, snippet(knowledge_fts, 3, '[', ']', '...', 24)
             FROM knowledge_fts
             WHERE knowledge_fts MATCH ?1 AND workspace = ?2
             ORDER BY bm25(knowledge_fts, 0.0, 0.0, 2.0, 1.0), rowid
             LIMIT ?3",
        )?;
        let rows = st.query_map(params![fts, workspace, limit as i64], |r| {
            Ok(KnowledgeHit {
                path: r.get(0)?,
                heading: r.get(1)?,
                snippet: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

/// A Markdown text cut at its headings (ATX, `#` to `######`, outside
/// fenced code); text before the first heading goes under `title`.
pub(crate) fn sections(title: &str, text: &str) -> Vec<Section> {
    let mut out = Vec::new();
    let mut heading = title.to_string();
    let mut body = String::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
        }
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if !fenced && (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            if !body.trim().is_empty() || heading != title {
                out.push(Section {
                    heading: std::mem::take(&mut heading),
                    body: std::mem::take(&mut body),
                });
            }
            heading = t[hashes..].trim().to_string();
            body.clear();
            continue;
        }
        body.push_str(line);
        body.push('\n');
    }
    if !body.trim().is_empty() || heading != title {
        out.push(Section { heading, body });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Reporter;

    fn reports() -> Reports {
        Reports::in_memory(Reporter {
            run_id: "r".into(),
            phase: "p".into(),
            agent: "a".into(),
            attempt: 1,
        })
        .unwrap()
    }

    #[test]
    fn markdown_is_cut_at_headings_outside_code() {
        let s = sections(
            "README.md",
            "intro\n# Install\nrun it\n```sh\n# not a heading\n```\n## Use\nlike so\n",
        );
        let headings: Vec<&str> = s.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(headings, ["README.md", "Install", "Use"]);
        assert!(s[1].body.contains("# not a heading"));
    }

    #[test]
    fn a_changed_document_is_indexed_again_and_a_gone_one_dropped() {
        let r = reports();
        let files = std::cell::RefCell::new(std::collections::HashMap::from([
            ("a.md", "# Deploy\nUse the blue-green rollout."),
            ("b.md", "# Style\nTabs, never spaces."),
        ]));
        let doc = |p: &str, h: &str| Document {
            path: p.into(),
            sha256: h.into(),
        };
        let read = |p: &str| files.borrow().get(p).map(|t| sections(p, t));
        let n = r
            .sync_knowledge("/w", &[doc("a.md", "1"), doc("b.md", "1")], read)
            .unwrap();
        assert_eq!(
            n,
            SyncCount {
                indexed: 2,
                removed: 0
            }
        );
        let hits = r.search_knowledge("/w", "rollout", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            (hits[0].path.as_str(), hits[0].heading.as_str()),
            ("a.md", "Deploy")
        );
        assert!(hits[0].snippet.contains("[rollout]"), "{hits:?}");
        // Unchanged hashes: nothing to do.
        let read = |p: &str| files.borrow().get(p).map(|t| sections(p, t));
        let n = r
            .sync_knowledge("/w", &[doc("a.md", "1"), doc("b.md", "1")], read)
            .unwrap();
        assert_eq!(n, SyncCount::default());
        // a.md changed, b.md went away.
        files
            .borrow_mut()
            .insert("a.md", "# Deploy\nUse canary releases.");
        let read = |p: &str| files.borrow().get(p).map(|t| sections(p, t));
        let n = r.sync_knowledge("/w", &[doc("a.md", "2")], read).unwrap();
        assert_eq!(
            n,
            SyncCount {
                indexed: 1,
                removed: 1
            }
        );
        assert!(r.search_knowledge("/w", "rollout", 5).unwrap().is_empty());
        assert_eq!(r.search_knowledge("/w", "canary", 5).unwrap().len(), 1);
        assert!(r.search_knowledge("/w", "tabs", 5).unwrap().is_empty());
        // Another workspace's index is its own.
        assert!(
            r.search_knowledge("/other", "canary", 5)
                .unwrap()
                .is_empty()
        );
    }
}

//! What the server tells an agent about its workspace: whether it is
//! working where orch put it (`verify_workspace`, from the marker orch
//! leaves for the attempt), and the project's documents
//! (`search_knowledge`, over the files the `knowledge` setting names).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::check::{self, MAX_SHORT};
use super::phase::sha256_hex;
use super::server::{OrchServer, reply, store_err};
use crate::git;
use crate::store::{Document, sections};

/// The most hits `search_knowledge` returns.
const MAX_HITS: u32 = 50;

/// How many searches run at once in this process (each holds up to
/// [`LIMITS`]`.bytes` of documents while it runs).
static SEARCHES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VerifyWorkspace {
    /// The directory you are working in (what `pwd` prints); the server's
    /// own working directory when left out.
    pub(crate) path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchKnowledge {
    /// Words to look for in the project's documents.
    pub(crate) query: String,
    /// At most this many sections (1-50, default 10).
    pub(crate) limit: Option<u32>,
}

/// How far one search for documents goes: however an agent shapes the
/// workspace (links back to a folder, a deep or wide tree, huge files),
/// the search ends, soon.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// The most documents indexed.
    pub(crate) documents: usize,
    /// The largest document (a larger one is left out).
    pub(crate) document_bytes: u64,
    /// The most bytes of documents one search reads.
    pub(crate) bytes: u64,
    /// How many folders deep below the workspace a document may be.
    pub(crate) depth: usize,
    /// The most folder entries one search looks at.
    pub(crate) entries: usize,
}

/// The limits of `search_knowledge`.
pub(super) const LIMITS: Limits = Limits {
    documents: 2_000,
    document_bytes: 1 << 20,
    bytes: 32 << 20,
    depth: 16,
    entries: 50_000,
};

/// The workspace's documents that `patterns` match, with their bytes.
#[derive(Debug, Default)]
pub(super) struct Documents {
    pub(crate) found: Vec<(Document, Vec<u8>)>,
    /// Why some may be missing: the search reached one of its limits.
    pub(crate) cut: Option<String>,
}

/// The workspace's documents that `patterns` match, within [`LIMITS`]:
/// see [`documents_within`].
pub(super) fn documents(workspace: &Path, patterns: &[String]) -> Documents {
    documents_within(workspace, patterns, &LIMITS)
}

/// The workspace's documents that `patterns` (globs relative to the
/// workspace) match: regular files found by walking the workspace's
/// folders without following any link (each folder and file opened
/// beneath it, see [`crate::beneath`]), at most `limits.depth` folders
/// deep, looking at `limits.entries` folder entries at most; hidden names
/// only where a pattern names them with a literal dot; each once, in path
/// order, at most `limits.documents` of them and `limits.bytes` in all.
pub(super) fn documents_within(
    workspace: &Path,
    patterns: &[String],
    limits: &Limits,
) -> Documents {
    let Ok(root) = crate::beneath::Root::open(workspace) else {
        return Documents::default();
    };
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    let mut budget = limits.entries;
    let mut cut = None;
    for pattern in patterns {
        if let Err(why) = walk(&root, pattern, limits, &mut budget, &mut paths) {
            cut = Some(why);
            break;
        }
    }
    if paths.len() > limits.documents {
        cut.get_or_insert_with(|| {
            format!(
                "{} files match; only the first {} (in path order) were searched",
                paths.len(),
                limits.documents
            )
        });
    }
    let mut found = Vec::new();
    let mut total: u64 = 0;
    for rel in paths.into_iter().take(limits.documents) {
        let Ok(bytes) = root.read(&rel, limits.document_bytes) else {
            continue;
        };
        total += bytes.len() as u64;
        if total > limits.bytes {
            cut.get_or_insert_with(|| {
                format!(
                    "the documents hold more than {} bytes, the most one search reads: `{}` and those after it (in path order) were not searched",
                    limits.bytes,
                    rel.display()
                )
            });
            break;
        }
        found.push((
            Document {
                path: rel.display().to_string(),
                sha256: sha256_hex(&bytes),
            },
            bytes,
        ));
    }
    Documents { found, cut }
}

/// Add the files beneath `root` that `pattern` matches to `paths`, taking
/// one from `budget` for each folder entry looked at; `Err` says why the
/// walk stopped early (the budget is spent).
fn walk(
    root: &crate::beneath::Root,
    pattern: &str,
    limits: &Limits,
    budget: &mut usize,
    paths: &mut BTreeSet<PathBuf>,
) -> Result<(), String> {
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let parts: Vec<&str> = pattern
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") {
        return Ok(());
    }
    let Ok(whole) = glob::Pattern::new(&parts.join("/")) else {
        return Ok(());
    };
    // Each part up to the first `**` matches one folder level, so a folder
    // it does not match is not entered.
    let Ok(levels) = parts
        .iter()
        .take_while(|p| !p.contains("**"))
        .map(|p| glob::Pattern::new(p))
        .collect::<Result<Vec<_>, _>>()
    else {
        return Ok(());
    };
    let recursive = levels.len() < parts.len();
    // The folders the pattern names literally are where the walk starts.
    let literal = parts
        .iter()
        .take_while(|p| !p.contains(['*', '?', '[']))
        .count();
    if literal == parts.len() {
        paths.insert(parts.iter().collect());
        return Ok(());
    }
    let depth = if recursive {
        limits.depth
    } else {
        parts.len().min(limits.depth)
    };
    // Below a `**`, a hidden name can match only a part that starts with a
    // literal dot (`**` and `*` never match one).
    let hidden = parts[levels.len()..].iter().any(|p| p.starts_with('.'));
    let mut folders: Vec<PathBuf> = vec![parts[..literal].iter().collect()];
    while let Some(dir) = folders.pop() {
        let folder = if dir.as_os_str().is_empty() {
            root.open_dir(Path::new("."))
        } else {
            root.open_dir(&dir)
        };
        // A folder that is a link, or is gone, is passed over.
        let Ok(entries) = folder.and_then(|f| f.entries()) else {
            continue;
        };
        for entry in entries {
            if *budget == 0 {
                return Err(format!(
                    "the search looked at {} folder entries, the most it looks at: files beyond them were not searched (narrow the `knowledge` patterns)",
                    limits.entries
                ));
            }
            *budget -= 1;
            let Ok((name, kind)) = entry else { continue };
            let Some(name) = name.to_str() else { continue };
            let rel = dir.join(name);
            let level = rel.components().count();
            let fits = match levels.get(level - 1) {
                Some(part) => part.matches_with(name, opts),
                None => !name.starts_with('.') || hidden,
            };
            if !fits {
                continue;
            }
            if kind.is_dir() && level < depth {
                folders.push(rel);
            } else if kind.is_file()
                && level <= depth
                && rel.to_str().is_some_and(|r| whole.matches_with(r, opts))
            {
                paths.insert(rel);
            }
        }
    }
    Ok(())
}

impl OrchServer {
    fn verify(&self, a: VerifyWorkspace) -> Result<Value, String> {
        check::opt_text("path", a.path.as_deref(), 1, 4096)?;
        let args = &self.state.caller;
        let workspace = &self.state.workspace;
        let Some(marker_path) = &args.marker else {
            return Err(
                "this attempt has no workspace marker; orch run gives one to every agent".into(),
            );
        };
        let recover = format!("run `cd {}` and work there", workspace.display());
        let marker: Value = std::fs::read_to_string(marker_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| {
                format!(
                    "the workspace marker `{}` is missing or unreadable. Recovery: {recover}",
                    marker_path.display()
                )
            })?;
        let expected = json!({"run": args.run, "phase": args.phase, "agent": args.agent,
                              "attempt": args.attempt, "workspace": workspace});
        if marker != expected {
            return Err(format!(
                "the workspace marker `{}` is for {marker}, not this attempt ({expected})",
                marker_path.display()
            ));
        }
        let here = match (&a.path, &self.state.peer_cwd) {
            (Some(p), _) => PathBuf::from(p),
            (None, Some(cwd)) => cwd.clone(),
            (None, None) => {
                return Err("cannot tell where you are: give `path` (what `pwd` prints)".into());
            }
        };
        let real = std::fs::canonicalize(&here).map_err(|e| {
            format!(
                "`{}` cannot be opened ({e}). Recovery: {recover}",
                here.display()
            )
        })?;
        if !real.starts_with(workspace) {
            return Err(format!(
                "you are in `{}`, outside your workspace `{}`. Recovery: {recover}",
                real.display(),
                workspace.display()
            ));
        }
        Ok(json!({
            "valid": true, "path": real, "workspace": workspace,
            "branch": git::branch(workspace), "head": git::head(workspace),
            "run": args.run, "phase": args.phase, "agent": args.agent, "attempt": args.attempt,
            "message": "Workspace verified: you are in the workspace orch gave this attempt.",
        }))
    }

    fn search(&self, a: SearchKnowledge) -> Result<Value, String> {
        check::text("query", &a.query, 1, MAX_SHORT)?;
        let limit = a.limit.unwrap_or(10);
        check::range("limit", limit.into(), 1, MAX_HITS.into())?;
        let workspace = &self.state.workspace;
        let Documents { found, cut } = documents(workspace, &self.state.caller.knowledge);
        let docs: Vec<Document> = found.iter().map(|(d, _)| d.clone()).collect();
        let key = workspace.display().to_string();
        let reports = self.state.reports();
        let synced = reports
            .sync_knowledge(&key, &docs, |rel| {
                let (_, bytes) = found.iter().find(|(d, _)| d.path == rel)?;
                let text = std::str::from_utf8(bytes).ok()?;
                Some(sections(rel, text))
            })
            .map_err(store_err)?;
        let hits = reports
            .search_knowledge(&key, &a.query, limit as usize)
            .map_err(store_err)?;
        let mut answer = json!({"results": hits, "documents": docs.len(),
            "reindexed": synced.indexed, "patterns": self.state.caller.knowledge});
        if let Some(why) = cut {
            answer["incomplete"] = Value::String(why);
        }
        Ok(answer)
    }
}

#[tool_router(router = workspace_tools, vis = "pub(super)")]
impl OrchServer {
    #[tool(
        description = "Check that you are working in the workspace orch gave you (call it first): give the directory `pwd` prints. Returns the workspace, its git branch and HEAD, or how to get back."
    )]
    async fn verify_workspace(
        &self,
        Parameters(a): Parameters<VerifyWorkspace>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| self.verify(a)))
    }

    #[tool(
        description = "Search the project's documents (README, docs: the `knowledge` setting) by words; returns the matching sections, best first, with the words in context."
    )]
    async fn search_knowledge(
        &self,
        Parameters(a): Parameters<SearchKnowledge>,
    ) -> Result<CallToolResult, ErrorData> {
        // The walk, the reads and the index are blocking work: on a thread
        // of the blocking pool, never on the runtime's workers (which serve
        // every attempt's endpoints and supervise the agents), a few
        // searches at a time. The permit goes with the work, so a search
        // whose caller gave up still counts until it ends.
        let Ok(permit) = SEARCHES.acquire().await else {
            return reply(Err("orch is shutting down".into()));
        };
        let server = self.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            server.search(a)
        })
        .await
        .unwrap_or_else(|e| Err(format!("the search failed: {e}")));
        reply(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn patterns(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| s.to_string()).collect()
    }

    /// `documents_within` on a thread of its own: it must end within
    /// `limit` (the test fails, rather than hangs, on a walk that does not).
    fn search(ws: &Path, p: &[&str], limits: Limits, limit: Duration) -> Documents {
        let (tx, rx) = std::sync::mpsc::channel();
        let (ws, p) = (ws.to_path_buf(), patterns(p));
        std::thread::spawn(move || {
            let _ = tx.send(documents_within(&ws, &p, &limits));
        });
        rx.recv_timeout(limit)
            .unwrap_or_else(|_| panic!("the search did not end within {limit:?}"))
    }

    fn paths(d: &Documents) -> Vec<&str> {
        d.found.iter().map(|(d, _)| d.path.as_str()).collect()
    }

    #[test]
    fn links_are_never_followed_so_a_loop_of_them_ends_the_search_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, outside) = (dir.path().join("ws"), dir.path().join("outside"));
        write(&ws, "README.md", "# r");
        write(&ws, "docs/a.md", "# a");
        write(&ws, "docs/sub/b.md", "# b");
        write(&ws, "docs/.hidden.md", "# h");
        write(&outside, "x.md", "# secret");
        // Three links back to `docs` (an unbounded walk for a glob that
        // follows them), and links out of the workspace.
        for l in ["l1", "l2", "l3"] {
            symlink(".", ws.join("docs").join(l)).unwrap();
        }
        symlink("..", ws.join("docs/sub/up")).unwrap();
        symlink(&outside, ws.join("docs/out")).unwrap();
        symlink(outside.join("x.md"), ws.join("docs/key.md")).unwrap();
        let d = search(
            &ws,
            &["README.md", "docs/**/*.md"],
            LIMITS,
            Duration::from_secs(20),
        );
        assert_eq!(paths(&d), ["README.md", "docs/a.md", "docs/sub/b.md"]);
        assert_eq!(d.cut, None);
        assert_eq!(d.found[1].1, b"# a");

        // A pattern's literal folders are not followed either.
        symlink(&outside, ws.join("linked")).unwrap();
        let d = search(&ws, &["linked/*.md"], LIMITS, Duration::from_secs(20));
        assert!(d.found.is_empty(), "{:?}", paths(&d));
    }

    #[test]
    fn the_search_stops_at_its_limits_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        write(ws, "docs/a.md", "aaaaaa");
        write(ws, "docs/b.md", "bbbbbb");
        write(ws, "docs/c.md", "cccccc");
        write(ws, "docs/1/2/3/deep.md", "d");
        let all = ["docs/**/*.md"];
        let limit = Duration::from_secs(20);
        let d = search(ws, &all, LIMITS, limit);
        assert_eq!(
            paths(&d),
            ["docs/1/2/3/deep.md", "docs/a.md", "docs/b.md", "docs/c.md"]
        );
        assert_eq!(d.cut, None);

        // Depth: docs/1/2/3/deep.md is five levels down.
        let d = search(ws, &all, Limits { depth: 4, ..LIMITS }, limit);
        assert_eq!(paths(&d), ["docs/a.md", "docs/b.md", "docs/c.md"]);

        // Documents: the first ones in path order.
        let d = search(
            ws,
            &all,
            Limits {
                documents: 2,
                ..LIMITS
            },
            limit,
        );
        assert_eq!(paths(&d), ["docs/1/2/3/deep.md", "docs/a.md"]);
        assert!(d.cut.unwrap().contains("4 files match"));

        // Bytes in all: what fits, then the rest is left.
        let d = search(
            ws,
            &all,
            Limits {
                bytes: 10,
                ..LIMITS
            },
            limit,
        );
        assert_eq!(paths(&d), ["docs/1/2/3/deep.md", "docs/a.md"]);
        assert!(d.cut.unwrap().contains("`docs/b.md` and those after it"));

        // One document too large is left out, the others are read.
        write(ws, "docs/big.md", &"x".repeat(100));
        let d = search(
            ws,
            &all,
            Limits {
                document_bytes: 99,
                ..LIMITS
            },
            limit,
        );
        assert_eq!(d.found.len(), 4, "{:?}", paths(&d));

        // Folder entries looked at: a wide folder ends the walk.
        for i in 0..50 {
            write(ws, &format!("docs/wide/{i}.txt"), "");
        }
        let d = search(
            ws,
            &all,
            Limits {
                entries: 20,
                ..LIMITS
            },
            limit,
        );
        assert!(d.cut.unwrap().contains("looked at 20 folder entries"));
    }

    #[test]
    fn patterns_are_matched_as_globs_relative_to_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        write(ws, "README.md", "r");
        write(ws, "a/README.md", "r");
        write(ws, "b/README.md", "r");
        write(ws, "b/c/README.md", "r");
        write(ws, ".github/README.md", "r");
        write(ws, "docs/.notes/n.md", "n");
        write(ws, "docs/x.md", "x");
        let found = |p: &[&str]| {
            paths(&search(ws, p, LIMITS, Duration::from_secs(20)))
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        // `*` stays in one folder, and never matches a hidden name.
        assert_eq!(found(&["*/README.md"]), ["a/README.md", "b/README.md"]);
        assert_eq!(
            found(&["**/README.md"]),
            ["README.md", "a/README.md", "b/README.md", "b/c/README.md"]
        );
        // A hidden name is matched only by a part that starts with a dot.
        assert_eq!(found(&[".github/*.md"]), [".github/README.md"]);
        assert_eq!(found(&["docs/**/*.md"]), ["docs/x.md"]);
        assert_eq!(found(&["docs/.*/*.md"]), ["docs/.notes/n.md"]);
        // `./` and doubled slashes are the same pattern; `..` names
        // nothing; a file named twice is found once.
        assert_eq!(found(&["./docs//x.md", "docs/*.md"]), ["docs/x.md"]);
        assert!(found(&["../*.md", "docs/../README.md", "/etc/*"]).is_empty());
    }
}

//! What the server tells an agent about its workspace: whether it is
//! working where orch put it (`verify_workspace`, from the marker orch
//! leaves for the attempt), and the project's documents
//! (`search_knowledge`, over the files the `knowledge` setting names).

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

/// The most documents indexed per workspace, and the largest one.
const MAX_DOCUMENTS: usize = 2_000;
const MAX_DOCUMENT_BYTES: u64 = 1 << 20;
/// The most hits `search_knowledge` returns.
const MAX_HITS: u32 = 50;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyWorkspace {
    /// The directory you are working in (what `pwd` prints); the server's
    /// own working directory when left out.
    pub path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchKnowledge {
    /// Words to look for in the project's documents.
    pub query: String,
    /// At most this many sections (1-50, default 10).
    pub limit: Option<u32>,
}

/// The workspace's documents that `patterns` match, with their bytes:
/// regular files inside the workspace, opened beneath it without
/// following any link (see [`crate::beneath`]); hidden paths are left
/// out; each once, in path order.
pub fn documents(workspace: &Path, patterns: &[String]) -> Vec<(Document, Vec<u8>)> {
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let Ok(root) = crate::beneath::Root::open(workspace) else {
        return Vec::new();
    };
    let base = glob::Pattern::escape(&workspace.display().to_string());
    let mut found: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        let Ok(paths) = glob::glob_with(&format!("{base}/{pattern}"), opts) else {
            continue;
        };
        for path in paths.flatten() {
            if let Some(rel) = crate::beneath::relative_to(workspace, &path) {
                found.push(rel.to_path_buf());
            }
        }
    }
    found.sort();
    found.dedup();
    found
        .into_iter()
        .take(MAX_DOCUMENTS)
        .filter_map(|rel| {
            let bytes = root.read(&rel, MAX_DOCUMENT_BYTES).ok()?;
            Some((
                Document {
                    path: rel.display().to_string(),
                    sha256: sha256_hex(&bytes),
                },
                bytes,
            ))
        })
        .collect()
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
        let found = documents(workspace, &self.state.caller.knowledge);
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
        Ok(
            json!({"results": hits, "documents": docs.len(), "reindexed": synced.indexed,
                  "patterns": self.state.caller.knowledge}),
        )
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
        reply(self.verify(a))
    }

    #[tool(
        description = "Search the project's documents (README, docs: the `knowledge` setting) by words; returns the matching sections, best first, with the words in context."
    )]
    async fn search_knowledge(
        &self,
        Parameters(a): Parameters<SearchKnowledge>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(self.search(a))
    }
}

//! Phase completion: an agent claims its phase is done with an artifact
//! whose SHA-256 orch checks, and a judge approves or rejects a claim by
//! the same hash.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::check::{self, MAX_SHORT, MAX_TEXT};
use super::ledger::{Claim, Verdict as LedgerVerdict};
use super::server::{OrchServer, reply, store_err};
use crate::clock::now_ms;
use crate::store::ReportKind;

/// The fewest characters an artifact may have.
pub(super) const MIN_ARTIFACT_CHARS: usize = 100;
/// The largest artifact orch reads to check its hash.
const MAX_ARTIFACT_BYTES: u64 = 10 << 20;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(super) enum Confidence {
    High,
    Medium,
    Low,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CompletePhase {
    /// The artifact (a Markdown file), relative to the workspace.
    pub(crate) artifact_path: String,
    /// The SHA-256 of the file, 64 hex digits (`sha256sum FILE`).
    pub(crate) artifact_hash: String,
    pub(crate) summary: String,
    pub(crate) open_questions: Option<Vec<String>>,
    pub(crate) confidence: Confidence,
    pub(crate) recommended_next_phase: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Verdict {
    /// The phase under review.
    pub(crate) phase: String,
    /// The hash of the artifact its agent claimed (complete_phase).
    pub(crate) artifact_hash: String,
    pub(crate) reason: String,
    /// What to change (for a rejection).
    pub(crate) fix_instructions: Option<String>,
}

/// The SHA-256 of `bytes`, in lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `given` as 64 lower-case hex digits (an optional `sha256:` prefix and
/// upper case are accepted).
fn hash_arg(given: &str) -> Result<String, String> {
    let h = given
        .trim()
        .trim_start_matches("sha256:")
        .to_ascii_lowercase();
    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "`artifact_hash` `{given}` is not a SHA-256: give the 64 hex digits `sha256sum FILE` prints"
        ));
    }
    Ok(h)
}

/// Everything wrong with an artifact's content, for one error.
fn artifact_problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let n = text.chars().count();
    if n < MIN_ARTIFACT_CHARS {
        out.push(format!(
            "it has {n} characters: an artifact needs at least {MIN_ARTIFACT_CHARS}"
        ));
    }
    let heading = text.lines().any(|l| {
        let t = l.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') && !t[hashes..].trim().is_empty()
    });
    if !heading {
        out.push("it has no Markdown heading: add a line like `# Plan`".into());
    }
    out
}

fn verdict(server: &OrchServer, a: Verdict, approved: bool) -> Result<serde_json::Value, String> {
    check::text("phase", &a.phase, 1, MAX_SHORT)?;
    check::text("reason", &a.reason, 1, MAX_TEXT)?;
    check::opt_text(
        "fix_instructions",
        a.fix_instructions.as_deref(),
        1,
        MAX_TEXT,
    )?;
    let hash = hash_arg(&a.artifact_hash)?;
    let caller = &server.state.caller;
    // The server exists with this tool only for a judge's attempt (see
    // `OrchServer::new`); it judges one artifact.
    let Some(judging) = &caller.judging else {
        return Err("only a judge's attempt may give a verdict".into());
    };
    if a.phase != judging.phase {
        return Err(format!(
            "you judge phase `{}`, not `{}`: give phase = \"{}\"",
            judging.phase, a.phase, judging.phase
        ));
    }
    if hash != judging.artifact_hash {
        return Err(format!(
            "you judge `{}` at SHA-256 {}, not {hash}: give artifact_hash = \"{}\"",
            judging.artifact_path, judging.artifact_hash, judging.artifact_hash
        ));
    }
    let fix = a.fix_instructions.clone().unwrap_or_default();
    let id = server
        .state
        .reports()
        .append(
            ReportKind::Verdict,
            None,
            &json!({"phase": a.phase, "artifact_hash": hash, "approved": approved,
                    "reason": a.reason, "fix_instructions": a.fix_instructions}),
            now_ms(),
        )
        .map_err(store_err)?;
    server.state.ledger.verdict(LedgerVerdict {
        phase: a.phase,
        judge: caller.agent.clone(),
        attempt: caller.attempt,
        artifact_hash: hash,
        approved,
        reason: a.reason,
        fix,
    });
    Ok(json!({"verdict_id": id, "approved": approved}))
}

#[tool_router(router = phase_tools, vis = "pub(super)")]
impl OrchServer {
    #[tool(
        description = "Claim this phase is complete with an artifact: a Markdown file in the workspace (at least 100 characters and a heading) and its SHA-256, which orch checks against the file."
    )]
    async fn complete_phase(
        &self,
        Parameters(a): Parameters<CompletePhase>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(crate::blocking::in_place(|| {
            check::text("summary", &a.summary, 1, MAX_TEXT)?;
            check::list(
                "open_questions",
                a.open_questions.as_deref().unwrap_or(&[]),
                MAX_TEXT,
            )?;
            check::opt_text(
                "recommended_next_phase",
                a.recommended_next_phase.as_deref(),
                1,
                MAX_SHORT,
            )?;
            let hash = hash_arg(&a.artifact_hash)?;
            let (rel, bytes) = check::workspace_file(
                "artifact_path",
                &a.artifact_path,
                &self.state.workspace,
                MAX_ARTIFACT_BYTES,
            )?;
            let actual = sha256_hex(&bytes);
            let mut problems = Vec::new();
            if actual != hash {
                problems.push(format!(
                    "its SHA-256 is {actual}, not {hash}: hash the file as it is now"
                ));
            }
            match std::str::from_utf8(&bytes) {
                Ok(text) => problems.extend(artifact_problems(text)),
                Err(_) => problems.push("it is not UTF-8 text".into()),
            }
            let mut claim = json!({
                "artifact_path": rel, "artifact_hash": hash, "summary": a.summary,
                "open_questions": a.open_questions.unwrap_or_default(), "confidence": a.confidence,
                "recommended_next_phase": a.recommended_next_phase, "accepted": problems.is_empty()});
            // A refused claim is recorded too: the engine fails a phase whose
            // agent's last word on an artifact was a claim orch refused.
            let refused = (!problems.is_empty())
                .then(|| format!("`{rel}` cannot complete the phase: {}", problems.join("; ")));
            if let Some(why) = &refused {
                claim["refused"] = json!(why);
                claim["actual_hash"] = json!(actual);
            }
            let id = self
                .state
                .reports()
                .append(ReportKind::Claim, None, &claim, now_ms())
                .map_err(store_err)?;
            let caller = &self.state.caller;
            self.state.ledger.claim(Claim {
                phase: caller.phase.clone(),
                agent: caller.agent.clone(),
                attempt: caller.attempt,
                artifact_path: rel.clone(),
                artifact_hash: hash.clone(),
                refused: refused.clone(),
            });
            match refused {
                Some(why) => Err(why),
                None => Ok(json!({"claim_id": id, "artifact_path": rel, "artifact_hash": hash})),
            }
        }))
    }

    #[tool(
        description = "As a judge, approve a phase's completion claim (named by its artifact hash), with the reason."
    )]
    async fn approve_phase(
        &self,
        Parameters(a): Parameters<Verdict>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(verdict(self, a, true))
    }

    #[tool(
        description = "As a judge, reject a phase's completion claim (named by its artifact hash), with the reason and what to fix."
    )]
    async fn reject_phase(
        &self,
        Parameters(a): Parameters<Verdict>,
    ) -> Result<CallToolResult, ErrorData> {
        reply(verdict(self, a, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_needs_length_and_a_heading() {
        assert_eq!(
            artifact_problems(&format!("# Plan\n{}", "x".repeat(100))).len(),
            0
        );
        let p = artifact_problems("#nospace\nshort");
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(hash_arg("abc").is_err());
        let h = sha256_hex(b"");
        assert_eq!(
            h,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hash_arg(&format!("sha256:{}", h.to_uppercase())).unwrap(),
            h
        );
    }
}

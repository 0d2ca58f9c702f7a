//! Completion claims, as the engine reads them when it decides a phase's
//! outcome: an agent that told orch (`complete_phase`) its phase is done
//! with an artifact is held to it. For each artifact an agent's final
//! attempt claimed, its last claim counts: a claim orch refused, or one
//! whose hash no longer matches the file on disk, fails the phase.

use std::collections::BTreeMap;
use std::path::Path;

use super::identity::sha256_file;
use crate::store::{Reader, ReportFilter, ReportKind, ReportRow};

/// Check the claims of `phase` in `run_id` made by each `(agent, attempt)`
/// of `finals` (the attempt each agent ended with) against the files under
/// `workdir`. `Err` says what does not hold; a history orch cannot read
/// fails the check too (a claim that cannot be checked is not trusted).
pub fn check(
    state_dir: &Path,
    run_id: &str,
    phase: &str,
    finals: &[(String, u32)],
    workdir: &Path,
) -> Result<(), String> {
    let claims = read(state_dir, run_id, phase)
        .map_err(|e| format!("cannot read the completion claims of `{phase}`: {e}"))?;
    // Per artifact, the last claim of an agent's final attempt.
    let mut last: BTreeMap<(&str, &str), &ReportRow> = BTreeMap::new();
    for c in &claims {
        if !finals
            .iter()
            .any(|(agent, attempt)| *agent == c.agent && *attempt == c.attempt)
        {
            continue;
        }
        if let Some(path) = c.data["artifact_path"].as_str() {
            last.insert((c.agent.as_str(), path), c);
        }
    }
    for ((agent, path), c) in last {
        let claimed = c.data["artifact_hash"].as_str().unwrap_or_default();
        if c.data["accepted"] == false {
            let why = c.data["refused"].as_str().unwrap_or("refused");
            return Err(format!(
                "{agent} claimed the phase complete but orch refused the claim: {why}"
            ));
        }
        match sha256_file(&workdir.join(path)) {
            None => {
                return Err(format!(
                    "{agent} claimed the phase complete with `{path}`, which is gone"
                ));
            }
            Some(actual) if actual != claimed => {
                return Err(format!(
                    "{agent} claimed the phase complete with `{path}` at SHA-256 {claimed}, \
                     but the file is now {actual}"
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn read(state_dir: &Path, run_id: &str, phase: &str) -> Result<Vec<ReportRow>, String> {
    // No history, no claims: an agent's server writes into this database.
    let Some(reader) = Reader::open(state_dir).map_err(|e| e.to_string())? else {
        return Ok(Vec::new());
    };
    reader
        .reports(
            run_id,
            &ReportFilter {
                kinds: &[ReportKind::Claim],
                phase: Some(phase),
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::sha256_hex;
    use crate::store::{Reporter, Reports, Store};
    use serde_json::json;

    fn claim(state: &Path, agent: &str, attempt: u32, path: &str, hash: &str, accepted: bool) {
        let who = Reporter {
            run_id: "r1".into(),
            phase: "plan".into(),
            agent: agent.into(),
            attempt,
        };
        let mut reports = Reports::open(state, who).unwrap();
        let mut data = json!({"artifact_path": path, "artifact_hash": hash, "accepted": accepted});
        if !accepted {
            data["refused"] = json!("`plan.md` cannot complete the phase: too short");
        }
        reports.append(ReportKind::Claim, None, &data, 1).unwrap();
    }

    #[test]
    fn the_last_claim_of_the_final_attempt_must_match_the_file() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        drop(Store::open(state.path()).unwrap());
        std::fs::write(ws.path().join("plan.md"), "# Plan\nv2").unwrap();
        let v1 = sha256_hex(b"# Plan\nv1");
        let v2 = sha256_hex(b"# Plan\nv2");
        let finals = |a: u32| vec![("claude".to_string(), a)];
        let check = |a| check(state.path(), "r1", "plan", &finals(a), ws.path());

        // No claim: nothing to hold the agent to.
        assert_eq!(check(1), Ok(()));
        // Attempt 1 claimed v1 (since changed): only counts if it is final.
        claim(state.path(), "claude", 1, "plan.md", &v1, true);
        let err = check(1).unwrap_err();
        assert!(err.contains(&v1) && err.contains(&v2), "{err}");
        assert_eq!(check(2), Ok(()));
        // A refused claim, then an accepted one: the last counts.
        claim(state.path(), "claude", 2, "plan.md", &v1, false);
        assert!(
            check(2)
                .unwrap_err()
                .contains("refused the claim: `plan.md`")
        );
        claim(state.path(), "claude", 2, "plan.md", &v2, true);
        assert_eq!(check(2), Ok(()));
        // The file went away after the claim.
        std::fs::remove_file(ws.path().join("plan.md")).unwrap();
        assert!(check(2).unwrap_err().contains("which is gone"));
        // Other phases' and runs' claims are not this phase's.
        assert_eq!(
            super::check(state.path(), "r2", "plan", &finals(2), ws.path()),
            Ok(())
        );
    }
}

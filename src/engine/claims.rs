//! Completion claims, as the engine holds a phase to them when it decides
//! its outcome: an agent that told orch (`complete_phase`) its phase is
//! done with an artifact is held to it. For each artifact an agent's final
//! attempt claimed, its last claim counts: a claim orch refused, or one
//! whose hash no longer matches the file on disk, fails the phase. The
//! claims are those that reached the engine through the agents' own
//! endpoints (the [`Ledger`]), never read back from a file an agent could
//! write.

use std::collections::BTreeMap;
use std::path::Path;

use super::identity::sha256_beneath;
use crate::mcp::ledger::{Claim, Ledger};

/// Check the claims of `phase` made by each `(agent, attempt)` of `finals`
/// (the attempt each agent ended with) against the files under `workdir`
/// (opened without following links). `Err` says what does not hold.
pub(crate) fn check(
    ledger: &Ledger,
    phase: &str,
    finals: &[(String, u32)],
    workdir: &Path,
) -> Result<(), String> {
    let claims = ledger.claims(phase);
    // Per artifact, the last claim of an agent's final attempt.
    let mut last: BTreeMap<(&str, &str), &Claim> = BTreeMap::new();
    for c in &claims {
        if finals
            .iter()
            .any(|(agent, attempt)| *agent == c.agent && *attempt == c.attempt)
        {
            last.insert((c.agent.as_str(), c.artifact_path.as_str()), c);
        }
    }
    for ((agent, path), c) in last {
        if let Some(why) = &c.refused {
            return Err(format!(
                "{agent} claimed the phase complete but orch refused the claim: {why}"
            ));
        }
        match sha256_beneath(workdir, path) {
            None => {
                return Err(format!(
                    "{agent} claimed the phase complete with `{path}`, which is gone (or is no longer a regular file)"
                ));
            }
            Some(actual) if actual != c.artifact_hash => {
                return Err(format!(
                    "{agent} claimed the phase complete with `{path}` at SHA-256 {}, \
                     but the file is now {actual}",
                    c.artifact_hash
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::sha256_hex;

    fn claim(ledger: &Ledger, agent: &str, attempt: u32, path: &str, hash: &str, ok: bool) {
        ledger.claim(Claim {
            phase: "plan".into(),
            agent: agent.into(),
            attempt,
            artifact_path: path.into(),
            artifact_hash: hash.into(),
            refused: (!ok).then(|| "`plan.md` cannot complete the phase: too short".into()),
        });
    }

    #[test]
    fn the_last_claim_of_the_final_attempt_must_match_the_file() {
        let ws = tempfile::tempdir().unwrap();
        let ledger = Ledger::new();
        std::fs::write(ws.path().join("plan.md"), "# Plan\nv2").unwrap();
        let v1 = sha256_hex(b"# Plan\nv1");
        let v2 = sha256_hex(b"# Plan\nv2");
        let finals = |a: u32| vec![("claude".to_string(), a)];
        let check = |a| check(&ledger, "plan", &finals(a), ws.path());

        // No claim: nothing to hold the agent to.
        assert_eq!(check(1), Ok(()));
        // Attempt 1 claimed v1 (since changed): only counts if it is final.
        claim(&ledger, "claude", 1, "plan.md", &v1, true);
        let err = check(1).unwrap_err();
        assert!(err.contains(&v1) && err.contains(&v2), "{err}");
        assert_eq!(check(2), Ok(()));
        // A refused claim, then an accepted one: the last counts.
        claim(&ledger, "claude", 2, "plan.md", &v1, false);
        assert!(
            check(2)
                .unwrap_err()
                .contains("refused the claim: `plan.md`")
        );
        claim(&ledger, "claude", 2, "plan.md", &v2, true);
        assert_eq!(check(2), Ok(()));
        // The file swapped for a link to the same bytes elsewhere: not the
        // file that was claimed.
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("p.md"), "# Plan\nv2").unwrap();
        std::fs::remove_file(ws.path().join("plan.md")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join("p.md"), ws.path().join("plan.md"))
            .unwrap();
        assert!(check(2).unwrap_err().contains("which is gone"));
        // The file went away after the claim.
        std::fs::remove_file(ws.path().join("plan.md")).unwrap();
        assert!(check(2).unwrap_err().contains("which is gone"));
        // Other phases' claims are not this phase's.
        assert_eq!(
            super::check(&ledger, "build", &finals(2), ws.path()),
            Ok(())
        );
    }
}

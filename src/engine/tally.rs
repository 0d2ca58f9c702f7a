//! What an attempt's events add up to, and how an attempt ended: pure
//! functions of what the CLI printed and how its process exited, folded the
//! same way live and in tests on recorded streams.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crate::clock::now_ms;
use crate::events::{Event, RateLimit};
use crate::model::AgentKind;
use crate::store::Outcome;

/// The figures and facts of one attempt so far, one event at a time.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) turns: u32,
    pub(crate) session_id: Option<String>,
    pub(crate) tokens_in: u64,
    pub(crate) tokens_out: u64,
    pub(crate) cost_usd: Option<f64>,
    /// A rate limit was seen; inside, when it lifts, when the CLI said.
    pub(crate) rate_limited: Option<Option<u64>>,
    resets: Resets,
    /// The CLI's own final result event was seen: its session finished.
    pub(crate) finished: bool,
    /// The CLI said its session ended in error.
    pub(crate) cli_error: bool,
    /// Why, in the CLI's words (its error result, or its first error).
    pub(crate) reason: Option<String>,
    /// The model called a tool in a turn past the budget orch enforces.
    pub(crate) over_budget: bool,
}

impl Tally {
    /// Fold one event in. `stopping`: orch is stopping the attempt (a turn
    /// the CLI ends then was cut short). `max_turns`: the turn budget, when
    /// orch enforces it.
    pub(crate) fn apply(&mut self, ev: &Event, stopping: bool, max_turns: Option<u32>) {
        match &ev {
            Event::SessionStart {
                session_id: Some(s),
                ..
            } if self.session_id.is_none() => self.session_id = Some(s.clone()),
            // A turn the CLI ends because orch stopped it was cut short.
            Event::TurnEnd if !stopping && !self.over_budget => self.turns += 1,
            // A tool call once the budget is used up: the
            // model is working in a turn it may not have.
            // (A final answer is let through: stopping it
            // would only throw finished work away.)
            Event::ToolCall { .. } if max_turns.is_some_and(|m| self.turns >= m) => {
                self.over_budget = true;
            }
            Event::Usage {
                tokens_in,
                tokens_out,
                cost_usd,
            } => {
                self.tokens_in += tokens_in;
                self.tokens_out += tokens_out;
                if let Some(c) = cost_usd {
                    self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
                }
            }
            Event::Result {
                is_error,
                num_turns,
                session_id,
                tokens_in,
                tokens_out,
                cost_usd,
                text: t,
                subtype,
            } => {
                self.cli_error |= *is_error;
                self.finished = true;
                if *is_error && self.reason.is_none() {
                    self.reason = t.clone().or_else(|| subtype.clone());
                }
                if let Some(n) = num_turns {
                    self.turns = self.turns.max(*n);
                }
                if let Some(s) = session_id
                    && self.session_id.is_none()
                {
                    self.session_id = Some(s.clone());
                }
                if let Some(t) = tokens_in {
                    self.tokens_in = self.tokens_in.max(*t);
                }
                if let Some(t) = tokens_out {
                    self.tokens_out = self.tokens_out.max(*t);
                }
                if let Some(c) = cost_usd {
                    self.cost_usd = Some(self.cost_usd.map_or(*c, |k| k.max(*c)));
                }
            }
            Event::Error {
                message,
                rate_limit,
            } => {
                if let Some(limit) = rate_limit {
                    self.rate_limited = self.resets.saw(*limit);
                }
                if self.reason.is_none() {
                    self.reason = Some(message.clone());
                }
            }
            _ => {}
        }
    }

    /// A rate limit read from the CLI's stderr.
    pub(crate) fn rate_limit(&mut self, limit: RateLimit) {
        self.rate_limited = self.resets.saw(limit);
    }
}

/// The rate limits an attempt saw. The latest reset counts (a CLI that
/// retries on its own reports one per try; the last is current), except
/// that a wall-clock time, given to the minute, does not replace an exact
/// one (Claude's rate_limit_event comes before the same reset in its text).
#[derive(Debug, Default, Clone)]
struct Resets {
    lifts: Option<u64>,
    exact: bool,
}

impl Resets {
    /// Note a rate limit seen now; what the attempt's result says of them.
    fn saw(&mut self, limit: RateLimit) -> Option<Option<u64>> {
        if let Some(at) = limit.lifts_at(now_ms())
            && (limit.exact() || !self.exact || self.lifts.is_none())
        {
            self.lifts = Some(at);
            self.exact = limit.exact();
        }
        Some(self.lifts)
    }
}

/// How the attempt's process ended, and what orch saw of it besides its
/// events.
pub(crate) struct Ending<'a> {
    pub(crate) kind: AgentKind,
    pub(crate) status: &'a std::io::Result<ExitStatus>,
    /// orch stopped it (cancelled, timed out, stalled, over its turns): the
    /// outcome and why.
    pub(crate) stop: Option<(Outcome, String)>,
    /// The CLI said it runs with weaker rules than asked.
    pub(crate) weakened: Option<&'a str>,
    /// The last thing it said on stderr.
    pub(crate) last_err: Option<&'a str>,
}

/// The outcome of an attempt, why, and whether trying again cannot help.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Classified {
    pub(crate) outcome: Outcome,
    pub(crate) reason: Option<String>,
    pub(crate) permanent: bool,
}

/// Decide how an attempt ended from how its process ended and its tally.
pub(crate) fn classify(end: &Ending<'_>, tally: &Tally) -> Classified {
    let failed = |reason: String| Classified {
        outcome: Outcome::Failed,
        reason: Some(reason),
        permanent: false,
    };
    if let Some(w) = end.weakened {
        return Classified {
            permanent: true,
            ..failed(format!("ran with weaker rules than asked: {w}"))
        };
    }
    if let Some((outcome, reason)) = &end.stop {
        return Classified {
            outcome: *outcome,
            reason: Some(reason.clone()),
            permanent: false,
        };
    }
    match (end.status, tally.cli_error) {
        // An LLM CLI that exits 0 without its final result event did not
        // finish a session (a crash it hid, a wrapper, `/bin/true`).
        (Ok(s), false) if s.success() && end.kind.is_llm() && !tally.finished => failed(format!(
            "{} exited with status 0 without its final result event: the session did not finish",
            end.kind
        )),
        (Ok(s), false) if s.success() => Classified {
            outcome: Outcome::Succeeded,
            reason: tally.reason.clone(),
            permanent: false,
        },
        (Ok(_), true) => failed(
            tally
                .reason
                .clone()
                .unwrap_or_else(|| "the agent reported an error".into()),
        ),
        (Ok(s), false) => {
            let how = match (s.code(), s.signal()) {
                (Some(c), _) => format!("exited with status {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => "exited abnormally".into(),
            };
            failed(match end.last_err {
                Some(said) => format!("{how}; its last stderr line: {said}"),
                None => how,
            })
        }
        (Err(e), _) => failed(format!("cannot wait for the process: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::process::ExitStatusExt;

    use crate::agents::adapter;
    use crate::events::rate_limit;

    /// A stream recorded from the real CLI (`tests/fixtures/streams`),
    /// folded as the supervisor folds it: stdout events, stderr rate limits.
    fn recorded(kind: AgentKind, scenario: &str, cut_before_result: bool) -> Tally {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/streams")
            .join(kind.as_str());
        let read = |ext: &str| {
            std::fs::read_to_string(dir.join(format!("{scenario}.{ext}"))).unwrap_or_default()
        };
        let a = adapter(kind);
        let mut tally = Tally::default();
        for line in read("jsonl").lines() {
            for ev in a.parse_line(line) {
                if cut_before_result && matches!(ev, Event::Result { .. }) {
                    return tally;
                }
                tally.apply(&ev, false, None);
            }
        }
        for line in read("stderr").lines() {
            if let Some(limit) = rate_limit::read(line) {
                tally.rate_limit(limit);
            }
        }
        tally
    }

    fn exited(code: i32) -> std::io::Result<ExitStatus> {
        Ok(ExitStatus::from_raw(code << 8))
    }

    fn ending<'a>(kind: AgentKind, status: &'a std::io::Result<ExitStatus>) -> Ending<'a> {
        Ending {
            kind,
            status,
            stop: None,
            weakened: None,
            last_err: None,
        }
    }

    const LLMS: [AgentKind; 5] = [
        AgentKind::Claude,
        AgentKind::Codex,
        AgentKind::Gemini,
        AgentKind::Opencode,
        AgentKind::Copilot,
    ];

    #[test]
    fn every_clis_finished_session_succeeds_and_one_cut_short_does_not() {
        let ok = exited(0);
        for kind in LLMS {
            let t = recorded(kind, "text-only", false);
            assert!(t.finished && !t.cli_error, "{kind}: {t:?}");
            let end = classify(&ending(kind, &ok), &t);
            assert_eq!(end.outcome, Outcome::Succeeded, "{kind}: {end:?}");
            // The same CLI exiting 0 before its result event did not finish.
            let cut = recorded(kind, "text-only", true);
            let end = classify(&ending(kind, &ok), &cut);
            assert_eq!(end.outcome, Outcome::Failed, "{kind}");
            assert!(
                end.reason
                    .unwrap()
                    .contains("without its final result event"),
                "{kind}"
            );
        }
        // A plain command has no result event to give.
        let end = classify(&ending(AgentKind::Command, &ok), &Tally::default());
        assert_eq!(end.outcome, Outcome::Succeeded);
    }

    #[test]
    fn every_clis_rate_limit_is_seen() {
        for kind in LLMS {
            let t = recorded(kind, "rate-limit", false);
            assert!(t.rate_limited.is_some(), "{kind}: {t:?}");
        }
    }

    #[test]
    fn turns_past_the_budget_and_turns_cut_short_are_not_counted() {
        let call = Event::ToolCall {
            id: Some("1".into()),
            name: "Read".into(),
            input: serde_json::Value::Null,
        };
        let mut t = Tally::default();
        t.apply(&Event::TurnEnd, false, Some(1));
        assert!(!t.over_budget);
        // A tool call once the one turn is used up: over the budget, and no
        // turn counted after it.
        t.apply(&call, false, Some(1));
        assert!(t.over_budget);
        t.apply(&Event::TurnEnd, false, Some(1));
        assert_eq!(t.turns, 1);
        // A turn the CLI ends while orch stops it was cut short.
        let mut t = Tally::default();
        t.apply(&Event::TurnEnd, true, None);
        assert_eq!(t.turns, 0);
    }

    #[test]
    fn what_orch_saw_outranks_how_the_process_exited() {
        let ok = exited(0);
        let t = Tally {
            finished: true,
            ..Tally::default()
        };
        // Stopped by orch: its outcome, whatever the exit.
        let stopped = Ending {
            stop: Some((Outcome::TimedOut, "timed out after 1s".into())),
            ..ending(AgentKind::Claude, &ok)
        };
        let end = classify(&stopped, &t);
        assert_eq!(
            (end.outcome, end.reason.as_deref(), end.permanent),
            (Outcome::TimedOut, Some("timed out after 1s"), false)
        );
        // Weaker rules than asked: failed for good, even when also stopped.
        let weakened = Ending {
            weakened: Some("sandbox unavailable"),
            ..stopped
        };
        let end = classify(&weakened, &t);
        assert_eq!(end.outcome, Outcome::Failed);
        assert!(end.permanent);
        assert!(end.reason.unwrap().contains("weaker rules"));
        // The CLI's own error result keeps its words.
        let mut t = Tally::default();
        t.apply(
            &Event::Result {
                is_error: true,
                num_turns: None,
                session_id: None,
                tokens_in: None,
                tokens_out: None,
                cost_usd: None,
                text: Some("credit balance too low".into()),
                subtype: None,
            },
            false,
            None,
        );
        let end = classify(&ending(AgentKind::Claude, &exited(1)), &t);
        assert_eq!(end.reason.as_deref(), Some("credit balance too low"));
        // Otherwise the exit, with the last thing said on stderr.
        let status = exited(3);
        let said = Ending {
            last_err: Some("no such model"),
            ..ending(AgentKind::Gemini, &status)
        };
        let end = classify(&said, &Tally::default());
        assert_eq!(
            end.reason.as_deref(),
            Some("exited with status 3; its last stderr line: no such model")
        );
        let killed = Ok(ExitStatus::from_raw(9));
        let end = classify(&ending(AgentKind::Command, &killed), &Tally::default());
        assert_eq!(end.reason.as_deref(), Some("killed by signal 9"));
    }

    #[test]
    fn the_latest_reset_counts_unless_it_is_only_to_the_minute() {
        let now = now_ms();
        let mut r = Resets::default();
        assert_eq!(r.saw(RateLimit::Unknown), Some(None));
        // A CLI retrying on its own: each try's delay, the last one counts.
        r.saw(RateLimit::After { ms: 7_500 });
        let last = r.saw(RateLimit::After { ms: 30_000 }).flatten().unwrap();
        assert!(last >= now + 30_000 && last < now + 31_000, "{last}");
        // An exact reset, then the same to the minute: the exact one stays.
        let exact = now + 17_000;
        r.saw(RateLimit::At { unix_ms: exact });
        assert_eq!(
            r.saw(RateLimit::Around {
                unix_ms: now + 60_000
            }),
            Some(Some(exact))
        );
        // No reset, or one beyond belief, keeps what is known.
        assert_eq!(r.saw(RateLimit::Unknown), Some(Some(exact)));
        assert_eq!(
            r.saw(RateLimit::After {
                ms: 365 * 86_400_000
            }),
            Some(Some(exact))
        );
        // To the minute is better than nothing.
        let mut r = Resets::default();
        assert_eq!(
            r.saw(RateLimit::Around {
                unix_ms: now + 60_000
            }),
            Some(Some(now + 60_000))
        );
    }
}

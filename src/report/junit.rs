//! A run as JUnit XML (`orch run --junit FILE`, `orch runs show --junit
//! FILE`): one test suite per phase; in it one test case for the phase
//! itself (its gate: agents, artifacts, claims, judge) and one per agent.
//! An agent's earlier failed attempts are reruns of its case (flaky when it
//! succeeded in the end); a failure's text is the tail of its output.
//!
//! Agents wrote the reasons and the output (and a stored run's names are
//! what its database says): every text goes through [`text`], so control
//! characters and what XML refuses (quick-junit drops ANSI escapes and
//! most of C0 without a trace, and writes U+FFFE and U+FFFF, which no XML
//! reader accepts) are shown as escapes.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};

use super::text;
use crate::store::{AgentTotal, PhaseDetail, RunDetail, Status};

/// One line of text (a name, a reason).
fn line(s: &str) -> String {
    text::line(s).into_owned()
}

/// The output's tail, a line each.
fn tail(output: &[String]) -> String {
    text::lines(&output.join("\n")).into_owned()
}

fn took(a: Option<u64>, b: Option<u64>) -> Option<Duration> {
    Some(Duration::from_millis(b?.saturating_sub(a?)))
}

fn status(s: Status, message: Option<&str>, output: &[String]) -> TestCaseStatus {
    let mut st = match s {
        Status::Succeeded => return TestCaseStatus::success(),
        Status::Skipped | Status::Cancelled | Status::Running => TestCaseStatus::skipped(),
        Status::Failed | Status::TimedOut => TestCaseStatus::non_success(NonSuccessKind::Failure),
    };
    st.set_type(s.as_str());
    if let Some(m) = message {
        st.set_message(line(m));
    }
    if !output.is_empty() {
        st.set_description(tail(output));
    }
    st
}

fn phase_case(p: &PhaseDetail) -> TestCase {
    let mut c = TestCase::new("phase", status(p.status, p.reason.as_deref(), &[]));
    c.set_classname(line(&p.name));
    if let Some(t) = took(p.started_ms, p.ended_ms) {
        c.set_time(t);
    }
    if !p.required {
        c.add_property(("required", "false"));
    }
    c
}

fn agent_case(phase: &str, total: &AgentTotal<'_>) -> TestCase {
    let attempts = &total.attempts;
    let last = total.last();
    let mut c = TestCase::new(
        line(&last.agent),
        status(last.status, last.reason.as_deref(), &last.output),
    );
    c.set_classname(line(phase));
    if let Some(t) = took(total.started_ms(), last.ended_ms) {
        c.set_time(t);
    }
    if !last.output.is_empty() {
        c.set_system_out(tail(&last.output));
    }
    c.add_property(("attempts", attempts.len().to_string().as_str()));
    c.add_property(("turns", last.turns.to_string().as_str()));
    let tokens = total.tokens_in + total.tokens_out;
    c.add_property(("tokens", tokens.to_string().as_str()));
    for a in &attempts[..attempts.len() - 1] {
        let kind = if a.status == Status::TimedOut || a.status == Status::Failed {
            NonSuccessKind::Failure
        } else {
            NonSuccessKind::Error
        };
        let mut r = TestRerun::new(kind);
        r.set_type(a.status.as_str());
        if let Some(m) = &a.reason {
            r.set_message(line(m));
        }
        if let Some(t) = took(a.started_ms, a.ended_ms) {
            r.set_time(t);
        }
        if !a.output.is_empty() {
            r.set_description(tail(&a.output));
        }
        c.status.add_rerun(r);
    }
    c
}

/// The run as a JUnit report.
pub(crate) fn report(d: &RunDetail) -> Report {
    let mut report = Report::new(line(&format!(
        "orch {} {}",
        d.run.pipeline_name, d.run.run_id
    )));
    if let Some(t) = took(Some(d.run.started_ms), d.run.ended_ms) {
        report.set_time(t);
    }
    for p in &d.phases {
        let mut suite = TestSuite::new(line(&p.name));
        if let Some(t) = took(p.started_ms, p.ended_ms) {
            suite.set_time(t);
        }
        suite.add_test_case(phase_case(p));
        for total in p.by_agent() {
            suite.add_test_case(agent_case(&p.name, &total));
        }
        report.add_test_suite(suite);
    }
    report
}

/// The report's XML.
pub(crate) fn xml(d: &RunDetail) -> String {
    report(d)
        .to_string()
        .unwrap_or_else(|e| format!("<!-- orch: cannot write the JUnit report: {e} -->\n"))
}

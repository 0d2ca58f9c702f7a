//! GitHub Actions workflow commands: `::error file=…,line=…,col=…::`
//! annotations for diagnostics, and `::group::` lines around each phase's
//! log. GitHub reads them from a step's standard output, shows at most 10
//! errors and 10 warnings per step, and does not nest groups.

use std::path::Path;

use crate::pipeline::diagnostic::{Diagnostic, Severity};

/// Annotations GitHub shows per step and severity.
pub const SHOWN_PER_KIND: usize = 10;

/// Inside GitHub Actions (`GITHUB_ACTIONS=true`).
pub fn active() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// A command's message: `%`, CR and LF escaped.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A command's property value: as `data`, and `:` and `,` too.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The path GitHub links: relative to the checkout (`GITHUB_WORKSPACE`).
fn repo_path(path: &str, workspace: Option<&Path>) -> String {
    let p = Path::new(path);
    let p = match (workspace, p.is_absolute()) {
        (Some(w), true) => p.strip_prefix(w).unwrap_or(p),
        _ => p,
    };
    p.to_string_lossy().trim_start_matches("./").to_string()
}

/// The annotations for `diags`: errors first, then warnings, each in the
/// order found, at most [`SHOWN_PER_KIND`] of each; a notice says how many
/// were left out (they are all in the log above).
pub fn annotations(diags: &[Diagnostic], workspace: Option<&Path>) -> Vec<String> {
    let mut out = Vec::new();
    let mut left_out = 0;
    for severity in [Severity::Error, Severity::Warning] {
        let of_kind: Vec<&Diagnostic> = diags.iter().filter(|d| d.severity == severity).collect();
        left_out += of_kind.len().saturating_sub(SHOWN_PER_KIND);
        for d in of_kind.into_iter().take(SHOWN_PER_KIND) {
            let j = d.to_json();
            let mut message = j.message.clone();
            if let Some(l) = &j.label {
                message.push_str(&format!(" ({l})"));
            }
            if let Some(h) = &j.help {
                message.push_str(&format!("\nhelp: {h}"));
            }
            out.push(format!(
                "::{} file={},line={},col={},endLine={},endColumn={},title={}::{}",
                if severity == Severity::Error {
                    "error"
                } else {
                    "warning"
                },
                property(&repo_path(&j.file, workspace)),
                j.line,
                j.column,
                j.end_line,
                j.end_column,
                property(&format!("orch {}", j.code)),
                data(&message)
            ));
        }
    }
    if left_out > 0 {
        out.push(format!(
            "::notice title=orch::{left_out} more diagnostic{} not annotated (GitHub shows {SHOWN_PER_KIND} errors and {SHOWN_PER_KIND} warnings per step); the log lists them all",
            if left_out == 1 { "" } else { "s" }
        ));
    }
    out
}

/// Opens a group in the log (ends the one before: groups do not nest).
pub fn group(title: &str) -> String {
    format!("::group::{}", data(title))
}

pub const END_GROUP: &str = "::endgroup::";

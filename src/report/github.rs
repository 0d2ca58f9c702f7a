//! GitHub Actions workflow commands: `::error file=…,line=…,col=…::`
//! annotations for diagnostics, and `::group::` lines around each phase's
//! log. GitHub reads them from a step's standard output, shows at most 10
//! errors and 10 warnings per step, and does not nest groups.
//!
//! The runner reads a command in every line a step prints (actions/runner,
//! `ActionCommandManager`): `::name …::data` at the start of a line once
//! leading white space is trimmed, and the older `##[name …]data` anywhere
//! in a line; lines end at LF, CR or CRLF. So text an agent wrote could
//! mask a secret, add annotations or stop the runner reading orch's own
//! commands wherever it is printed. Such text is printed between
//! `::stop-commands::TOKEN` and `::TOKEN::` (GitHub's documented way to
//! print untrusted text), with a token of 128 bits from the OS, fresh each
//! time and made after the text was, so it cannot be in it: the runner
//! reads no command in between, whatever the lines look like. JSON, which
//! has no line of agent text of its own, gets `#` written as `\u0023` in
//! `##[` instead (the same JSON).

use std::io::{self, Write};
use std::path::Path;

use crate::pipeline::diagnostic::{Diagnostic, Severity};

/// Annotations GitHub shows per step and severity.
pub(crate) const SHOWN_PER_KIND: usize = 10;

/// Inside GitHub Actions (`GITHUB_ACTIONS=true`).
pub(crate) fn active() -> bool {
    std::env::var("GITHUB_ACTIONS").is_ok_and(|v| v == "true")
}

/// A token for `::stop-commands::`: 128 bits from the OS, in hex.
fn token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        // std's hash keys come from the OS as well.
        use std::hash::{BuildHasher, Hasher};
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What `body` writes to `out`, read by GitHub's runner as text only when
/// `log` says `out` is the job's log: between `::stop-commands::TOKEN`
/// and `::TOKEN::`, the token fresh. The runner shows both lines (the
/// token masked).
pub(crate) fn text_only<W: Write, T>(
    out: &mut W,
    log: bool,
    body: impl FnOnce(&mut W) -> io::Result<T>,
) -> io::Result<T> {
    if !log {
        return body(out);
    }
    let token = token();
    writeln!(out, "::stop-commands::{token}")?;
    let written = body(out);
    // Commands are read again even when the body failed half way.
    let resumed = writeln!(out, "::{token}::");
    let written = written?;
    resumed?;
    Ok(written)
}

/// Whether standard output is the job's log: inside GitHub Actions, and
/// not a file (`>> "$GITHUB_STEP_SUMMARY"`, `> report.json`).
pub(crate) fn stdout_is_log() -> bool {
    use std::os::fd::AsFd;
    let file = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.is_file());
    active() && !file
}

/// JSON with no `##[` for the runner to read as a command: its `#` as
/// `\u0023`, which is the same JSON (`##[` is only ever inside a string,
/// and no escape there ends in `#`).
pub(crate) fn inert_json(json: Vec<u8>) -> Vec<u8> {
    const FROM: &[u8] = b"##[";
    if !json.windows(FROM.len()).any(|w| w == FROM) {
        return json;
    }
    let mut out = Vec::with_capacity(json.len() + 16);
    let mut i = 0;
    while i < json.len() {
        if json[i..].starts_with(FROM) {
            out.extend_from_slice(b"#\\u0023");
            i += 2;
        } else {
            out.push(json[i]);
            i += 1;
        }
    }
    out
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
pub(crate) fn annotations(diags: &[Diagnostic], workspace: Option<&Path>) -> Vec<String> {
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
pub(crate) fn group(title: &str) -> String {
    format!("::group::{}", data(title))
}

pub(crate) const END_GROUP: &str = "::endgroup::";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_text_is_escaped_in_orchs_own_commands() {
        // A message: `%`, CR and LF; a property: `:` and `,` as well (what
        // the runner unescapes, `%` first so `%0A` stays text).
        assert_eq!(data("100%0A\r\n::error::x"), "100%250A%0D%0A::error::x");
        assert_eq!(property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(group("x\ny"), "::group::x%0Ay");
    }

    #[test]
    fn text_only_pauses_commands_with_a_fresh_token() {
        let write = |log: bool| {
            let mut out = Vec::new();
            text_only(&mut out, log, |o| writeln!(o, "::error::x")).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(write(false), "::error::x\n");
        let (a, b) = (write(true), write(true));
        let lines: Vec<&str> = a.lines().collect();
        let token = lines[0].strip_prefix("::stop-commands::").unwrap();
        assert!(token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(lines[1..], ["::error::x", &format!("::{token}::")]);
        assert_ne!(a, b, "each pause has its own token");
    }

    #[test]
    fn json_keeps_its_value_without_a_command() {
        let v = serde_json::json!({"reason": "##[add-mask]s ###[error]x #[ ## [ \\##[", "n": 1});
        let json = inert_json(serde_json::to_vec_pretty(&v).unwrap());
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(!text.contains("##["), "{text}");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
            v
        );
        let plain = serde_json::to_vec(&serde_json::json!({"a": "#["})).unwrap();
        assert_eq!(inert_json(plain.clone()), plain);
    }
}

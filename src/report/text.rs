//! Agent text made fit to show. Everything an agent produced (its CLI's
//! output and stderr, the reasons quoted from them, what it reported
//! through orch's tools, tool names, learnings) is shown to people only
//! through here: a terminal acts on escape sequences (an OSC 52 writes the
//! clipboard, a title report types into the shell), a CI log viewer on
//! colours and sections, bidi overrides reorder what is read, and a line
//! break starts a line that can pass for orch's own. Each such character
//! is shown as an escape instead (`\x1b`, `\u{202e}`), so it is seen and
//! never acted on. JSON output keeps the text exact: JSON escapes it.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is shown escaped; `one_line` also escapes newlines and tabs.
fn escaped(c: char, one_line: bool) -> bool {
    match c {
        '\n' | '\t' => one_line,
        // C0 (CR and ESC among them), DEL and C1.
        c if c.is_control() => true,
        // Bidi embeddings, overrides and isolates (what "Trojan Source"
        // reorders text with), and the line and paragraph separators.
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}' => true,
        // Not characters: XML refuses them.
        '\u{FFFE}' | '\u{FFFF}' => true,
        _ => false,
    }
}

fn escape(c: char, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if (c as u32) < 0x100 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn shown(s: &str, one_line: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| escaped(c, one_line)) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if escaped(c, one_line) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Agent text over as many lines as it has: newlines and tabs kept, every
/// other control character, bidi control and line separator escaped.
pub(crate) fn lines(s: &str) -> Cow<'_, str> {
    shown(s, false)
}

/// Agent text on one line (a reason, a table cell, a tool name): newlines
/// and tabs escaped too.
pub(crate) fn line(s: &str) -> Cow<'_, str> {
    shown(s, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_left_as_it_is() {
        let s = "refused: Write (src/main.rs) — naïve 日本語 ✅";
        assert!(matches!(line(s), Cow::Borrowed(_)));
        assert_eq!(line(s), s);
        assert_eq!(lines("two\n\tlines"), "two\n\tlines");
    }

    #[test]
    fn what_a_terminal_would_act_on_is_shown_escaped() {
        // OSC 52 (clipboard write), a title report, a CSI, DEL, a C1 CSI.
        assert_eq!(
            line("\u{1b}]52;c;ZWNobyBoaQ==\u{7}x\u{1b}[21t\u{7f}\u{9b}2J"),
            "\\x1b]52;c;ZWNobyBoaQ==\\x07x\\x1b[21t\\x7f\\x9b2J"
        );
        // A carriage return would overwrite what came before on the line.
        assert_eq!(line("ok\rFAKE"), "ok\\rFAKE");
        assert_eq!(lines("ok\rFAKE"), "ok\\rFAKE");
        // Bidi overrides and isolates, line and paragraph separators.
        assert_eq!(
            line("a\u{202e}b\u{2066}c\u{2069}d\u{2028}e\u{2029}f"),
            "a\\u{202e}b\\u{2066}c\\u{2069}d\\u{2028}e\\u{2029}f"
        );
        assert_eq!(
            line("\u{0}\u{85}\u{fffe}\u{ffff}"),
            "\\x00\\x85\\u{fffe}\\u{ffff}"
        );
    }

    #[test]
    fn one_line_stays_one_line() {
        assert_eq!(
            line("failed\n[12:00:00.000] phase x: succeeded\tok"),
            "failed\\n[12:00:00.000] phase x: succeeded\\tok"
        );
        for s in [
            "a\nb",
            "a\rb",
            "a\u{2028}b",
            "a\u{85}b",
            "a\u{b}b",
            "a\u{c}b",
        ] {
            let shown = line(s);
            assert_eq!(shown.lines().count(), 1, "{s:?}");
            assert!(!shown.chars().any(|c| c.is_control()), "{s:?}");
        }
    }
}

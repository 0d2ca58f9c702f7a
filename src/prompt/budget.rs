//! The user prompt's budget: after the phase's own prompt, sections of
//! context from the run's records, each with a share of a token budget (4
//! characters a token, 8,000 tokens by default). A text keeps its end and
//! is marked `...(truncated)` where it was cut; a list keeps its most
//! recent items.

use serde::Serialize;

/// Characters per token, for every size orch states.
pub(crate) const CHARS_PER_TOKEN: usize = 4;
/// The default budget of a user prompt's sections, in tokens.
pub(crate) const DEFAULT_TOKENS: usize = 8_000;
/// Where a text was cut.
pub(crate) const TRUNCATED: &str = "...(truncated)";
/// Previous phases' artifacts share this many tokens, evenly.
pub(crate) const ARTIFACT_TOKENS: usize = 4_000;
/// A judge's diff is cut to this many characters before the budget.
pub(crate) const MAX_DIFF_CHARS: usize = 50_000;

/// Each section's share of the budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shares {
    pub(crate) description: f64,
    pub(crate) diff: f64,
    pub(crate) findings: f64,
    pub(crate) learnings: f64,
    pub(crate) comments: f64,
    pub(crate) previous: f64,
}

/// A worker's prompt.
pub(crate) const WORKER: Shares = Shares {
    description: 0.25,
    diff: 0.0,
    findings: 0.20,
    learnings: 0.15,
    comments: 0.15,
    previous: 0.25,
};

/// A judge's prompt, which has the diff.
pub(crate) const JUDGE: Shares = Shares {
    description: 0.15,
    diff: 0.25,
    findings: 0.15,
    learnings: 0.10,
    comments: 0.10,
    previous: 0.25,
};

/// `text` in at most `max` characters: whole, or its end after
/// [`TRUNCATED`] (the marker counts).
pub(crate) fn keep_end(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let room = max.saturating_sub(TRUNCATED.chars().count() + 1);
    let tail: String = text.chars().skip(n - room).collect();
    if max <= TRUNCATED.chars().count() {
        return TRUNCATED.chars().take(max).collect();
    }
    format!("{TRUNCATED}\n{tail}")
}

/// The most recent (last) `items` whose lines (`- item`) fit in `max`
/// characters, oldest first.
pub(crate) fn recent(items: &[String], max: usize) -> Vec<String> {
    let mut used = 0;
    let mut out = Vec::new();
    for item in items.iter().rev() {
        let cost = item.chars().count() + 3;
        if used + cost > max {
            break;
        }
        used += cost;
        out.push(item.clone());
    }
    out.reverse();
    out
}

/// A Markdown text's headings, each with its section's first paragraph.
pub(crate) fn summary(markdown: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut want_paragraph = true;
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, out: &mut Vec<String>| {
        if !paragraph.is_empty() {
            out.push(paragraph.join("\n"));
            paragraph.clear();
        }
    };
    for line in markdown.lines() {
        let t = line.trim_start();
        if t.starts_with('#') {
            flush(&mut paragraph, &mut out);
            out.push(line.to_string());
            want_paragraph = true;
        } else if t.is_empty() {
            if !paragraph.is_empty() {
                flush(&mut paragraph, &mut out);
                want_paragraph = false;
            }
        } else if want_paragraph {
            paragraph.push(line);
        }
    }
    flush(&mut paragraph, &mut out);
    out.join("\n\n")
}

/// An earlier phase's artifact in `max` characters: whole if it fits, else
/// its summary, else the summary's end.
pub(crate) fn artifact(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    keep_end(&summary(text), max)
}

/// The context a prompt's sections are made from, each list oldest first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    pub(crate) description: Option<String>,
    /// A judge's: the workspace's changes.
    pub(crate) diff: Option<String>,
    pub(crate) findings: Vec<String>,
    pub(crate) learnings: Vec<String>,
    pub(crate) comments: Vec<String>,
    /// What the phase's earlier attempts ended with.
    pub(crate) previous: Vec<String>,
    /// Earlier phases' artifacts: (phase and path, text).
    pub(crate) artifacts: Vec<(String, String)>,
}

/// One section as it went into the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Section {
    pub(crate) name: &'static str,
    pub(crate) text: String,
    pub(crate) tokens: usize,
    /// Cut to fit (a text shortened, or list items left out).
    pub(crate) truncated: bool,
}

/// The sections of `ctx` within `tokens`, in prompt order; empty ones are
/// left out.
pub(crate) fn sections(ctx: &Context, shares: &Shares, tokens: usize) -> Vec<Section> {
    let chars = |share: f64| ((tokens * CHARS_PER_TOKEN) as f64 * share) as usize;
    let mut out = Vec::new();
    let mut push = |name: &'static str, text: String, truncated: bool| {
        if !text.trim().is_empty() {
            let tokens = text.chars().count().div_ceil(CHARS_PER_TOKEN);
            out.push(Section {
                name,
                text,
                tokens,
                truncated,
            });
        }
    };
    let text_section = |t: &str, max: usize| {
        let kept = keep_end(t, max);
        let cut = kept != t;
        (kept, cut)
    };
    let list_section = |items: &[String], max: usize| {
        let kept = recent(items, max);
        let cut = kept.len() < items.len();
        let text = kept
            .iter()
            .map(|i| format!("- {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        (text, cut)
    };
    if let Some(d) = &ctx.description {
        let (t, cut) = text_section(d, chars(shares.description));
        push("description", t, cut);
    }
    if let Some(d) = &ctx.diff {
        let capped: String = d.chars().take(MAX_DIFF_CHARS).collect();
        let (t, cut) = text_section(&capped, chars(shares.diff));
        push("diff", t, cut || capped.len() < d.len());
    }
    if !ctx.artifacts.is_empty() {
        let each = ARTIFACT_TOKENS * CHARS_PER_TOKEN / ctx.artifacts.len();
        let mut cut = false;
        let parts: Vec<String> = ctx
            .artifacts
            .iter()
            .map(|(name, text)| {
                let kept = artifact(text, each);
                cut |= kept != *text;
                format!("### {name}\n\n{kept}")
            })
            .collect();
        push("artifacts", parts.join("\n\n"), cut);
    }
    let (t, cut) = list_section(&ctx.findings, chars(shares.findings));
    push("findings", t, cut);
    let (t, cut) = list_section(&ctx.learnings, chars(shares.learnings));
    push("learnings", t, cut);
    let (t, cut) = list_section(&ctx.comments, chars(shares.comments));
    push("comments", t, cut);
    let (t, cut) = list_section(&ctx.previous, chars(shares.previous));
    push("previous attempts", t, cut);
    out
}

/// The title each section has in the prompt.
pub(crate) fn title(name: &str) -> &'static str {
    match name {
        "description" => "What this pipeline is for",
        "diff" => "The changes under review",
        "artifacts" => "What earlier phases delivered",
        "findings" => "Findings so far",
        "learnings" => "Learnings that may apply",
        "comments" => "Comments",
        _ => "Earlier attempts of this phase",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_keeps_its_end_and_says_where_it_was_cut() {
        assert_eq!(keep_end("short", 10), "short");
        let cut = keep_end("0123456789abcdefghijklmnopqrstuvwxyz", 24);
        assert_eq!(cut, "...(truncated)\nrstuvwxyz");
        assert_eq!(cut.chars().count(), 24);
    }

    #[test]
    fn a_list_keeps_its_most_recent_items() {
        let items: Vec<String> = ["first finding", "second one", "third one"]
            .map(String::from)
            .to_vec();
        // "- " + item + "\n" per line: 13, 13 and 12 characters.
        assert_eq!(recent(&items, 26), ["second one", "third one"]);
        assert_eq!(recent(&items, 100), items);
        assert!(recent(&items, 5).is_empty());
    }

    #[test]
    fn an_artifact_is_whole_or_summarised_or_cut() {
        let doc = "# Plan\n\nIntro line one.\nIntro line two.\n\nMore intro.\n\n## Steps\n\nStep one.\n\nDetails nobody needs.\n";
        assert_eq!(artifact(doc, 1000), doc);
        let s = summary(doc);
        assert_eq!(
            s,
            "# Plan\n\nIntro line one.\nIntro line two.\n\n## Steps\n\nStep one."
        );
        assert_eq!(artifact(doc, 70), s);
        assert_eq!(artifact(doc, 30), keep_end(&s, 30));
    }

    #[test]
    fn sections_take_their_share_of_the_budget_in_order() {
        let ctx = Context {
            description: Some("d".repeat(500)),
            findings: (1..=9).map(|i| format!("finding {i}")).collect(),
            comments: vec!["looks good".into()],
            previous: vec!["attempt 1 failed: tests".into()],
            ..Default::default()
        };
        // 100 tokens = 400 characters: description 100, findings 80,
        // learnings 60, comments 60, previous 100.
        let s = sections(&ctx, &WORKER, 100);
        let names: Vec<&str> = s.iter().map(|x| x.name).collect();
        assert_eq!(
            names,
            ["description", "findings", "comments", "previous attempts"]
        );
        assert_eq!(s[0].text.chars().count(), 100);
        assert!(s[0].text.starts_with(TRUNCATED) && s[0].truncated);
        // Findings: 12-13 characters each; the last six fit in 80.
        assert_eq!(
            s[1].text,
            "- finding 4\n- finding 5\n- finding 6\n- finding 7\n- finding 8\n- finding 9"
        );
        assert!(s[1].truncated);
        assert!(!s[2].truncated);
        assert_eq!(s[0].tokens, 25);
        // A judge's diff is cut at 50,000 characters before its share.
        let judged = Context {
            diff: Some("x".repeat(60_000)),
            ..Default::default()
        };
        let s = sections(&judged, &JUDGE, DEFAULT_TOKENS);
        assert_eq!(s[0].name, "diff");
        assert_eq!(s[0].text.chars().count(), 8_000);
        assert!(s[0].truncated);
    }
}

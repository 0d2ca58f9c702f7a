//! Variables in prompts: `{{run_id}}`, `{{phase}}`, `{{artifacts.<phase>}}`
//! (the artifacts an earlier phase declares) and `{{inputs.<name>}}` (from
//! `orch run --input name=value`). Validation checks every one against the
//! pipeline; an unknown variable is an error there, so rendering never
//! turns one into an empty string.

use std::ops::Range;

/// One `{{ name }}` in a text: its byte range (braces included) and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Variable {
    pub(crate) span: Range<usize>,
    pub(crate) name: String,
}

/// What a variable name means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Meaning<'a> {
    RunId,
    Phase,
    Artifacts(&'a str),
    Input(&'a str),
}

/// The names a prompt may use, for messages.
pub(crate) const KNOWN: &str = "{{run_id}}, {{phase}}, {{artifacts.<phase>}}, {{inputs.<name>}}";

/// Whether `text` may hold a variable: [`variables`] finds none in a
/// text without `{{`.
pub(crate) fn may_hold_variables(text: &str) -> bool {
    memchr::memmem::find(text.as_bytes(), b"{{").is_some()
}

/// Every `{{ ... }}` in `text`, in order. A `{{` with no `}}` after it is
/// left as text.
pub(crate) fn variables(text: &str) -> Vec<Variable> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("{{") {
        let start = from + i;
        let Some(j) = text[start + 2..].find("}}") else {
            break;
        };
        let end = start + 2 + j + 2;
        out.push(Variable {
            span: start..end,
            name: text[start + 2..end - 2].trim().to_string(),
        });
        from = end;
    }
    out
}

/// What `name` refers to, or why it refers to nothing.
pub(crate) fn meaning(name: &str) -> Result<Meaning<'_>, String> {
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    match name.split_once('.') {
        None if name == "run_id" => Ok(Meaning::RunId),
        None if name == "phase" => Ok(Meaning::Phase),
        Some(("artifacts", p)) if word(p) => Ok(Meaning::Artifacts(p)),
        Some(("inputs", n)) if word(n) => Ok(Meaning::Input(n)),
        _ => Err(format!(
            "`{{{{{name}}}}}` is not a variable orch knows: {KNOWN}"
        )),
    }
}

/// `text` with every variable replaced by what `value` gives for it; the
/// first it has no value for is the error.
pub(crate) fn render(
    text: &str,
    value: impl Fn(&Meaning<'_>) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for v in variables(text) {
        let m = meaning(&v.name)?;
        let Some(x) = value(&m) else {
            return Err(format!("`{{{{{}}}}}` has no value here", v.name));
        };
        out.push_str(&text[last..v.span.start]);
        out.push_str(&x);
        last = v.span.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_found_named_and_filled() {
        let t = "Run {{run_id}}, phase {{ phase }}: read {{artifacts.plan}} for {{inputs.ticket}}. {{ unclosed";
        let vars = variables(t);
        let names: Vec<&str> = vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["run_id", "phase", "artifacts.plan", "inputs.ticket"]
        );
        assert_eq!(&t[vars[1].span.clone()], "{{ phase }}");
        let out = render(t, |m| {
            Some(match m {
                Meaning::RunId => "r1".into(),
                Meaning::Phase => "fix".into(),
                Meaning::Artifacts(p) => format!("{p}.md"),
                Meaning::Input(n) => format!("<{n}>"),
            })
        })
        .unwrap();
        assert_eq!(
            out,
            "Run r1, phase fix: read plan.md for <ticket>. {{ unclosed"
        );
    }

    #[test]
    fn an_unknown_variable_is_never_an_empty_string() {
        assert!(meaning("runid").unwrap_err().contains("{{runid}}"));
        assert!(meaning("inputs.").is_err());
        assert!(meaning("artifacts.a b").is_err());
        let e = render("x {{inputs.t}}", |m| match m {
            Meaning::Input(_) => None,
            _ => Some(String::new()),
        })
        .unwrap_err();
        assert!(e.contains("no value"), "{e}");
        assert!(render("{{nope}}", |_| Some("x".into())).is_err());
    }
}

//! The environment of an agent process: nothing inherited but what is
//! listed. A temporary home, the basics a CLI needs to run (PATH, locale),
//! the credentials on the pass-through list, and the agent's own `env`.

use super::adapter::Request;
use super::invocation::{EnvValue, EnvVar, REDACTED};

/// Variables every agent gets from orch's environment: enough to find
/// programs and speak the user's locale, nothing that configures a CLI.
pub(crate) const BASICS: &[&str] = &["PATH", "LANG", "LC_ALL", "TZ"];

/// Toolchain homes that default to a folder in the real home, which an
/// agent's own HOME does not have: (variable, folder under the home).
pub(crate) const TOOLCHAIN_HOMES: &[(&str, &str)] =
    &[("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")];

pub(crate) fn plain(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar::plain(name, value)
}

/// Variables naming directories of the invocation's own (`(variable,
/// subdirectory)`): the CLI's home and config dirs, created before it starts.
pub(crate) fn own_dirs<'a>(
    req: &'a Request<'_>,
    vars: &'a [(&str, &str)],
) -> impl Iterator<Item = EnvVar> + 'a {
    vars.iter()
        .map(|(name, dir)| plain(name, req.path_in_dir(dir).display().to_string()))
}

/// Add `var` unless the environment already names it.
/// Variables that make the dynamic loader or an interpreter run code from
/// a file they name, set empty in an agent CLI's environment unless its
/// agent sets them: a CLI that copies variables from a file into its own
/// environment where unset (Gemini CLI, from a `.env` of the workspace)
/// would otherwise give every program it starts, orch's own shells before
/// they enter their domain included, a library an agent planted.
pub(crate) const LOADERS: &[&str] = &[
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_LIBRARY_PATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "BASH_ENV",
    "ENV",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "GCONV_PATH",
];

pub(crate) fn add_missing(env: &mut Vec<EnvVar>, var: EnvVar) {
    if !env.iter().any(|e| e.name == var.name) {
        env.push(var);
    }
}

/// The environment every adapter starts from.
pub(crate) fn base(req: &Request<'_>) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = BASICS.iter().map(|n| EnvVar::pass_through(*n)).collect();
    // Its own home and temporary folder: nothing of the user's, and the
    // only places a confined agent may write besides the workspace.
    env.extend(own_dirs(req, &[("HOME", "home"), ("TMPDIR", "tmp")]));
    for (var, folder) in TOOLCHAIN_HOMES {
        if std::env::var_os(var).is_some() {
            env.push(EnvVar::pass_through(*var));
        } else if let Some(home) = &req.user_home
            && home.join(folder).is_dir()
        {
            env.push(plain(var, home.join(folder).display().to_string()));
        }
    }
    for name in &req.pass_env {
        add_missing(&mut env, EnvVar::pass_through(name.clone()));
    }
    for (name, value) in &req.agent.env {
        env.retain(|e| e.name != *name);
        env.push(EnvVar {
            name: name.clone(),
            value: classify(name, value),
        });
    }
    for server in &req.mcp_servers {
        for h in server.remote.iter().flat_map(|r| &r.headers) {
            add_missing(
                &mut env,
                EnvVar {
                    name: h.var.clone(),
                    value: h.value.clone(),
                },
            );
        }
        for (name, value) in &server.env {
            for var in referenced(value) {
                add_missing(&mut env, EnvVar::pass_through(var));
            }
            if let EnvValue::Secret(_) = value {
                add_missing(
                    &mut env,
                    EnvVar {
                        name: name.clone(),
                        value: value.clone(),
                    },
                );
            }
        }
    }
    for name in LOADERS {
        add_missing(&mut env, plain(name, ""));
    }
    env
}

/// How a value written in a pipeline file is treated: `${VAR}` references
/// are templates; a literal under a secret-looking name is a secret.
pub(crate) fn classify(name: &str, value: &str) -> EnvValue {
    if value.contains("${") {
        EnvValue::Template(value.to_string())
    } else if looks_secret(name) || looks_secret_value(value) {
        EnvValue::Secret(value.to_string())
    } else {
        EnvValue::Plain(value.to_string())
    }
}

/// An argv as shown and stored (`explain`, the run's records): a plain
/// command's `command` or an MCP server's, with each secret it holds
/// redacted by the rules of [`classify`], the process getting the values
/// as written. An entry that
///
/// - holds `${VAR}` is shown as written (a reference names the variable,
///   it holds no secret; orch does not fill it in an argv);
/// - looks like a credential ([`looks_secret_value`]) is `<redacted>`;
/// - is `NAME=VALUE` or `--NAME=VALUE` with a secret-looking name
///   ([`looks_secret`]) or value is shown as `NAME=<redacted>`;
/// - follows a flag with a secret-looking name (`--password`, `--api-key`,
///   `--token`), and is not a flag itself, is `<redacted>`.
pub(crate) fn shown_argv(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut after_secret_flag = false;
    for arg in argv {
        let flag = secret_flag(arg);
        out.push(if arg.contains("${") {
            arg.clone()
        } else if after_secret_flag && !arg.starts_with('-') {
            REDACTED.to_string()
        } else if let Some((name, value)) = arg.split_once('=')
            && is_name(name.trim_start_matches('-'))
            && !value.is_empty()
            && (looks_secret(name.trim_start_matches('-')) || looks_secret_value(value))
        {
            format!("{name}={REDACTED}")
        } else if looks_secret_value(arg) {
            REDACTED.to_string()
        } else {
            arg.clone()
        });
        after_secret_flag = flag;
    }
    out
}

/// A flag (`-x`, `--name`, no `=`) whose name says its value is a secret.
fn secret_flag(arg: &str) -> bool {
    let name = arg.trim_start_matches('-');
    arg.starts_with('-') && !arg.contains('=') && is_name(name) && looks_secret(name)
}

/// A variable or option name: letters, digits, `_` and `-`.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether a variable name says it holds a secret: one of its `_`-separated
/// words is KEY, TOKEN, SECRET, ... (`MAX_OUTPUT_TOKENS` is not one).
pub(crate) fn looks_secret(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "PAT",
        "COOKIE",
        "SESSION",
    ];
    name.to_ascii_uppercase()
        .split(['_', '-'])
        .any(|w| WORDS.contains(&w))
}

/// Whether a value looks like a credential whatever its name: a URL with a
/// password in it (`postgres://user:pass@host/db`), or a token in one of
/// the well-known formats (`sk-...`, `ghp_...`, `github_pat_...`,
/// `xoxb-...`, `glpat-...`, `AKIA...`, `AIza...`, a JWT).
pub(crate) fn looks_secret_value(value: &str) -> bool {
    let v = value.trim();
    // scheme://user:password@host
    if let Some((_, rest)) = v.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && userinfo
                .split_once(':')
                .is_some_and(|(_, pass)| !pass.is_empty())
        {
            return true;
        }
    }
    const PREFIXES: &[&str] = &[
        "sk-",
        "sk_live_",
        "rk_live_",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xoxr-",
        "glpat-",
        "AKIA",
        "ASIA",
        "AIza",
        "npm_",
        "pypi-",
        "hf_",
        "eyJ",
    ];
    let token_like = v.len() >= 16 && !v.contains(char::is_whitespace);
    token_like && PREFIXES.iter().any(|p| v.starts_with(p))
}

/// The variables a value refers to.
pub(crate) fn referenced(value: &EnvValue) -> Vec<String> {
    let EnvValue::Template(t) = value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = t.as_str();
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_string());
        rest = &after[end + 1..];
    }
    out
}

/// Fill `${VAR}` references; a missing variable becomes empty.
pub(crate) fn expand(template: &str, lookup: &impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        out.push_str(&lookup(&after[..end]).unwrap_or_default());
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// How a CLI's config file spells a reference to an environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvRef {
    /// `${NAME}` (Claude, Gemini, Copilot, and orch's own templates).
    Dollar,
    /// `{env:NAME}` (OpenCode).
    Braced,
}

impl EnvRef {
    fn to(self, name: &str) -> String {
        match self {
            EnvRef::Dollar => format!("${{{name}}}"),
            EnvRef::Braced => format!("{{env:{name}}}"),
        }
    }
}

/// A reference to variable `name` in a config file of `syntax`.
pub(crate) fn reference(name: &str, syntax: EnvRef) -> String {
    syntax.to(name)
}

/// The variable that carries header number `i` of remote server `server`
/// to the CLI: `ORCH_MCP_<SERVER>_HEADER_<i>`.
pub(crate) fn header_var(server: &str, i: usize) -> String {
    let s: String = server
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("ORCH_MCP_{s}_HEADER_{i}")
}

/// How a header's value travels: a template orch fills in at the start, or
/// (a literal) as a secret: either way never written into a file.
pub(crate) fn header_value(value: &str) -> EnvValue {
    if value.contains("${") {
        EnvValue::Template(value.to_string())
    } else {
        EnvValue::Secret(value.to_string())
    }
}

/// The text to write for an MCP server's variable in a config file the CLI
/// expands references in: templates with their references respelled, a
/// secret or pass-through as a reference to itself (its value travels in the
/// process environment, never in a file).
pub(crate) fn config_value(name: &str, value: &EnvValue, syntax: EnvRef) -> String {
    match value {
        EnvValue::Plain(v) => v.clone(),
        EnvValue::Template(t) => match syntax {
            EnvRef::Dollar => t.clone(),
            // A template holds only `${NAME}` references (see `classify`).
            EnvRef::Braced => t.replace("${", "{env:"),
        },
        EnvValue::PassThrough | EnvValue::PassThroughOrEmpty | EnvValue::Secret(_) => {
            syntax.to(name)
        }
    }
}

/// An MCP server's environment as a JSON object for a config file (see
/// [`config_value`]).
pub(crate) fn config_env(
    env: &[(String, EnvValue)],
    syntax: EnvRef,
) -> serde_json::Map<String, serde_json::Value> {
    env.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::Value::String(config_value(k, v, syntax)),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_in_each_config_syntax() {
        let template = EnvValue::Template("Bearer ${A}-${B}".into());
        let secret = EnvValue::Secret("s3cret".into());
        assert_eq!(
            config_value("X", &template, EnvRef::Dollar),
            "Bearer ${A}-${B}"
        );
        assert_eq!(
            config_value("X", &template, EnvRef::Braced),
            "Bearer {env:A}-{env:B}"
        );
        assert_eq!(config_value("TOKEN", &secret, EnvRef::Dollar), "${TOKEN}");
        assert_eq!(
            config_value("TOKEN", &secret, EnvRef::Braced),
            "{env:TOKEN}"
        );
        assert_eq!(
            config_value("P", &EnvValue::PassThrough, EnvRef::Braced),
            "{env:P}"
        );
        assert_eq!(
            config_value("M", &EnvValue::Plain("fast".into()), EnvRef::Braced),
            "fast"
        );
    }

    #[test]
    fn templates_and_secrets() {
        assert_eq!(
            classify("TAVILY_API_KEY", "${TAVILY_API_KEY}"),
            EnvValue::Template("${TAVILY_API_KEY}".into())
        );
        assert!(matches!(classify("API_TOKEN", "abc"), EnvValue::Secret(_)));
        assert!(matches!(classify("MODE", "fast"), EnvValue::Plain(_)));
        assert!(matches!(
            classify("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "64000"),
            EnvValue::Plain(_)
        ));
        assert!(matches!(classify("GITHUB_PAT", "x"), EnvValue::Secret(_)));
        // Secrets under names that do not say so, by their value.
        for secret in [
            "postgres://user:hunter2@db.internal:5432/app",
            "https://deploy:tok@example.com/repo.git",
            "sk-proj-abcdefghijklmnop",
            "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
        ] {
            assert!(
                matches!(classify("DATABASE_URL", secret), EnvValue::Secret(_)),
                "{secret}"
            );
        }
        for plain in [
            "postgres://db.internal:5432/app",
            "https://example.com/a@b",
            "https://user@example.com/",
            "sk-",
            "fast",
            "64000",
        ] {
            assert!(
                matches!(classify("DATABASE_URL", plain), EnvValue::Plain(_)),
                "{plain}"
            );
        }
        assert_eq!(
            referenced(&EnvValue::Template("Bearer ${A}-${B}".into())),
            vec!["A", "B"]
        );
        let lookup = |n: &str| (n == "A").then(|| "1".to_string());
        assert_eq!(expand("x${A}y${B}z${", &lookup), "x1yz${");
    }

    #[test]
    fn secrets_in_an_argv() {
        let argv: Vec<String> = [
            "tool",
            "sk-proj-abcdefghijklmnop",
            "--password",
            "hunter2",
            "--token",
            "${TOKEN}",
            "--api-key=k1",
            "API_TOKEN=t1",
            "--db=postgres://u:p@h/db",
            "--max-tokens",
            "100",
            "--auth",
            "--verbose",
            "MODE=fast",
            "a=b=c",
            "--url=https://example.com/x",
            "-c",
            "echo $TOKEN",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            shown_argv(&argv),
            [
                "tool",
                REDACTED,
                "--password",
                REDACTED,
                "--token",
                "${TOKEN}",
                "--api-key=<redacted>",
                "API_TOKEN=<redacted>",
                "--db=<redacted>",
                "--max-tokens",
                "100",
                "--auth",
                "--verbose",
                "MODE=fast",
                "a=b=c",
                "--url=https://example.com/x",
                "-c",
                "echo $TOKEN",
            ]
        );
    }
}

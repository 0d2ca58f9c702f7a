//! Reading pipeline files and the files they name (prompt files, profiles).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml::de::DeTable;

use super::clis::CliChecks;
use super::diagnostic::{Diagnostic, Problem, SourceFile};
use super::model::Pipeline;
use super::raw::{self, Decoder, RawToolSet};
use super::validate::Validator;

/// A pipeline that validated, and the warnings found on the way.
#[derive(Debug)]
pub struct Loaded {
    pub pipeline: Pipeline,
    pub warnings: Vec<Diagnostic>,
}

/// Everything wrong with a pipeline file (errors and warnings, in file order).
#[derive(Debug)]
pub struct Invalid {
    pub diagnostics: Vec<Diagnostic>,
}

/// Load and validate a pipeline file; `clis` answers what only the agent
/// CLIs and the machine know (what they can enforce depends on both).
pub fn load(path: &Path, clis: &dyn CliChecks) -> Result<Loaded, Invalid> {
    let name = path.display().to_string();
    let read = std::fs::read(path)
        .map_err(|e| io_reason(&e))
        .and_then(|b| {
            // Positions are kept in 32 bits (`Location`).
            if u32::try_from(b.len()).is_ok() {
                Ok(b)
            } else {
                Err("it is 4 GiB or larger".to_string())
            }
        });
    let bytes = match read {
        Ok(b) => b,
        Err(reason) => {
            let source = SourceFile::new(name.clone(), String::new());
            return Err(Invalid {
                diagnostics: vec![Diagnostic::error(
                    Problem::Unreadable { path: name, reason },
                    &source,
                    0..0,
                )],
            });
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let source = SourceFile::new(name.clone(), lossy);
            let offset = source.text.char_indices().nth(
                String::from_utf8_lossy(&e.as_bytes()[..valid])
                    .chars()
                    .count(),
            );
            let at = offset.map_or(valid, |(i, _)| i);
            return Err(Invalid {
                diagnostics: vec![Diagnostic::error(
                    Problem::NotUtf8 { path: name },
                    &source,
                    at..at,
                )],
            });
        }
    };
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&name, text, &base, clis).map(|mut l| {
        l.pipeline.path = path.to_path_buf();
        l
    })
}

/// Load and validate pipeline text; `base` is the directory relative paths
/// in the file are resolved against.
pub fn load_str(
    name: &str,
    text: String,
    base: &Path,
    clis: &dyn CliChecks,
) -> Result<Loaded, Invalid> {
    let source = SourceFile::new(name, text);
    let (raw, mut diags) = raw::decode(&source);
    let Some(raw) = raw else {
        return Err(Invalid { diagnostics: diags });
    };
    let (files, more) = Files::read(&raw, base);
    diags.extend(more);
    let mut v = Validator::new(&source, &files, clis);
    let pipeline = v.pipeline(raw);
    diags.extend(v.diags);
    diags.sort_by_key(|d| (d.source.name != source.name, d.span.start));
    match pipeline {
        Some(mut pipeline) if !diags.iter().any(Diagnostic::is_error) => {
            pipeline.path = PathBuf::from(name);
            Ok(Loaded {
                pipeline,
                warnings: diags,
            })
        }
        _ => Err(Invalid { diagnostics: diags }),
    }
}

/// Every file a pipeline names, read before validation (which reads
/// none): its prompt files, its profiles, and the workspace's `.mcp.json`.
#[derive(Debug, Default)]
pub(crate) struct Files {
    /// The pipeline file's directory, as written (for messages).
    pub(crate) base: PathBuf,
    /// `prompt_file` as written -> (its path, its text) or why it cannot be
    /// used.
    pub(crate) prompts: HashMap<String, Result<(PathBuf, String), Problem>>,
    /// Profile name -> what was read, or where orch looked.
    pub(crate) profiles: HashMap<String, Result<ReadProfile, String>>,
    /// The workspace's `.mcp.json`, when it has one.
    pub(crate) project: Option<super::mcp_json::ProjectServers>,
}

/// A profile file as read: its source (for diagnostics), the raw profile
/// and the problems in its front matter.
pub(crate) type ReadProfile = (Arc<SourceFile>, RawProfile, Vec<Diagnostic>);

impl Files {
    /// Read what `raw` names, relative to `base`; the diagnostics of files
    /// that cannot be read whatever names them (a malformed `.mcp.json`).
    pub(crate) fn read(raw: &raw::RawPipeline, base: &Path) -> (Files, Vec<Diagnostic>) {
        let mut files = Files {
            base: base.to_path_buf(),
            ..Default::default()
        };
        let mut diags = Vec::new();
        let root = repository_root(base);
        for phase in raw.phases.iter().flat_map(|p| &p.value) {
            if let Some(f) = &phase.prompt_file
                && !files.prompts.contains_key(&f.value)
            {
                let path = base.join(&f.value);
                let text = inside(&path, &root)
                    .map_err(|reason| Problem::PromptFile {
                        path: f.value.clone(),
                        reason,
                    })
                    .and_then(|()| {
                        std::fs::read_to_string(&path).map_err(|e| Problem::PromptFile {
                            path: f.value.clone(),
                            reason: io_reason(&e),
                        })
                    });
                files
                    .prompts
                    .insert(f.value.clone(), text.map(|t| (path, t)));
            }
            if let Some(n) = &phase.profile
                && !files.profiles.contains_key(&n.value)
            {
                files
                    .profiles
                    .insert(n.value.clone(), profile(base, &n.value));
            }
        }
        // The workspace (orch's working directory) may declare servers too.
        files.project = match std::env::current_dir().map(|d| super::mcp_json::read(&d)) {
            Ok(Ok(p)) => p,
            Ok(Err(d)) => {
                diags.push(*d);
                None
            }
            Err(_) => None,
        };
        (files, diags)
    }
}

pub(crate) fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "it is a directory".into(),
        std::io::ErrorKind::InvalidData => "it is not UTF-8 text".into(),
        _ => e.to_string().to_lowercase(),
    }
}

/// A profile file as written: front matter fields and the Markdown body.
#[derive(Debug)]
pub(crate) struct RawProfile {
    pub(crate) path: PathBuf,
    pub(crate) description: Option<String>,
    pub(crate) tools: Option<RawToolSet>,
    /// The model its agents use, and where it is written.
    pub(crate) model: Option<raw::SpStr>,
    /// System prompt layers it does without.
    pub(crate) omit: Vec<raw::SpStr>,
    pub(crate) body: String,
}

/// The directory a pipeline in `base` may take files from: its repository
/// (the nearest directory up from `base` with a `.git`), else `base`
/// itself. Prompt files and profiles outside it are refused: a pipeline
/// (or a pull request changing one) must not hand an agent, and so its
/// model provider, a file such as `~/.ssh/id_ed25519`.
pub(crate) fn repository_root(base: &Path) -> PathBuf {
    let start = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let abs = std::fs::canonicalize(start)
        .or_else(|_| std::path::absolute(start))
        .unwrap_or_else(|_| start.to_path_buf());
    abs.ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(&abs)
        .to_path_buf()
}

/// Whether `path` (resolved, symbolic links followed) lies inside `root`;
/// `Err` says where it really is.
pub(crate) fn inside(path: &Path, root: &Path) -> Result<(), String> {
    match std::fs::canonicalize(path) {
        Ok(real) if real.starts_with(root) => Ok(()),
        Ok(real) => Err(format!(
            "it is outside the repository `{}` (it is `{}`)",
            root.display(),
            real.display()
        )),
        Err(e) => Err(io_reason(&e)),
    }
}

/// Where profile `name` is looked for: `profiles/<name>.md` in the pipeline
/// file's directory, then in each of its ancestors up to its repository's
/// root.
pub(crate) fn profile_candidates(base: &Path, name: &str) -> Vec<PathBuf> {
    let root = repository_root(base);
    let start = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let abs = std::fs::canonicalize(start).unwrap_or_else(|_| root.clone());
    abs.ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .map(|dir| dir.join("profiles").join(format!("{name}.md")))
        .collect()
}

/// Find and read a profile. On success: its source (for diagnostics), the
/// raw profile, and any problems in its front matter. On failure: the
/// places looked at.
pub(crate) fn profile(
    base: &Path,
    name: &str,
) -> Result<(Arc<SourceFile>, RawProfile, Vec<Diagnostic>), String> {
    let candidates = profile_candidates(base, name);
    let root = repository_root(base);
    let Some((path, text)) = candidates
        .iter()
        .filter(|p| inside(p, &root).is_ok())
        .find_map(|p| std::fs::read_to_string(p).ok().map(|t| (p.clone(), t)))
    else {
        let shown: Vec<String> = candidates
            .iter()
            .take(3)
            .map(|p| format!("`{}`", p.display()))
            .collect();
        return Err(shown.join(", ") + if candidates.len() > 3 { ", ..." } else { "" });
    };
    let display = pathdiff(&path);
    let source = SourceFile::new(display, text);
    let (front, body) = split_front_matter(&source.text);
    let mut decoder = Decoder {
        source: &source,
        diags: Vec::new(),
        offset: 0,
    };
    let mut raw = RawProfile {
        path,
        description: None,
        tools: None,
        model: None,
        omit: Vec::new(),
        body: body.to_string(),
    };
    if let Some(FrontMatter::Yaml { text, offset }) = &front {
        let (f, problems) = super::front_matter::parse(text, *offset);
        for (reason, span) in problems {
            decoder.diags.push(Diagnostic::error(
                Problem::ProfileFrontMatter {
                    name: name.into(),
                    reason,
                },
                &source,
                span,
            ));
        }
        raw.description = f.description;
        raw.tools = f.tools;
        raw.model = f.model;
        raw.omit = f.omit;
    }
    if let Some(FrontMatter::Toml(masked)) = front {
        let (table, errors) = DeTable::parse_recoverable(&masked);
        // Like pipeline syntax errors: the first per line, and the
        // recovered table is not checked (it would only add noise).
        let mut errors: Vec<_> = errors
            .iter()
            .map(|e| {
                (
                    e.span().unwrap_or(0..0),
                    e.message().trim().lines().next().unwrap_or("").to_string(),
                )
            })
            .collect();
        errors.sort_by_key(|(span, _)| span.start);
        let mut last_line = None;
        for (span, reason) in &errors {
            let line = source.line_col(span.start).0;
            if last_line.replace(line) == Some(line) {
                continue;
            }
            decoder.diags.push(Diagnostic::error(
                Problem::ProfileFrontMatter {
                    name: name.into(),
                    reason: reason.clone(),
                },
                &source,
                span.clone(),
            ));
        }
        let entries = if errors.is_empty() {
            table.get_ref().iter().collect()
        } else {
            Vec::new()
        };
        for (k, v) in entries {
            match k.get_ref().as_ref() {
                "description" => {
                    raw.description = decoder.string("description", v).map(|s| s.value)
                }
                "tools" => raw.tools = decoder.toolset("tools", v),
                "model" => raw.model = decoder.string("model", v),
                "omit" => {
                    raw.omit = decoder
                        .strings("omit", v)
                        .map(|l| l.value)
                        .unwrap_or_default()
                }
                other => decoder.diags.push(Diagnostic::error(
                    Problem::UnknownKey {
                        key: other.to_string(),
                        table: format!("the front matter of profile `{name}`"),
                        suggestion: crate::model::suggest(
                            other,
                            ["description", "tools", "model", "omit"],
                        ),
                        known: &["description", "tools", "model", "omit"],
                    },
                    &source,
                    k.span(),
                )),
            }
        }
    }
    let diags = decoder.diags;
    Ok((source, raw, diags))
}

/// A path as diagnostics show it: relative to the working directory when
/// it is under it.
pub(crate) fn shown(path: &Path) -> String {
    pathdiff(path)
}

fn pathdiff(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

/// A profile's front matter, as found.
#[derive(Debug, PartialEq, Eq)]
enum FrontMatter<'a> {
    /// TOML between `+++` lines: the whole text with everything outside it
    /// blanked (same byte offsets), so TOML spans point into the real file.
    Toml(String),
    /// YAML between `---` lines (Claude Code's sub-agent files), and the
    /// byte offset it starts at.
    Yaml { text: &'a str, offset: usize },
}

/// Where a front matter fenced by `fence` lines (`---`, `+++`) opening the
/// text is: (its first byte, the byte after it, where the body starts).
fn fenced(text: &str, fence: &str) -> Option<(usize, usize, usize)> {
    let rest = text.strip_prefix(fence)?;
    let first_nl = rest.find('\n')?;
    if !rest[..first_nl].trim().is_empty() {
        return None;
    }
    let start = fence.len() + first_nl + 1;
    let mut offset = start;
    for line in text[start..].split_inclusive('\n') {
        if line.trim_end() == fence {
            return Some((start, offset, offset + line.len()));
        }
        offset += line.len();
    }
    None
}

/// Split front matter from a Markdown body.
fn split_front_matter(text: &str) -> (Option<FrontMatter<'_>>, &str) {
    if let Some((start, end, body)) = fenced(text, "---") {
        let yaml = FrontMatter::Yaml {
            text: &text[start..end],
            offset: start,
        };
        return (Some(yaml), &text[body..]);
    }
    let Some((start, end, body)) = fenced(text, "+++") else {
        return (None, text);
    };
    // The TOML keeps its offsets: everything else is blanked, newlines
    // kept, so positions in it are positions in the file.
    let masked: String = text
        .char_indices()
        .map(|(i, c)| {
            if (start..end).contains(&i) || c == '\n' {
                c.to_string()
            } else {
                " ".repeat(c.len_utf8())
            }
        })
        .collect();
    (Some(FrontMatter::Toml(masked)), &text[body..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_keeps_offsets() {
        let text = "+++\ndescription = \"x\"\n+++\n# Body\n";
        let (front, body) = split_front_matter(text);
        let Some(FrontMatter::Toml(front)) = front else {
            panic!("TOML front matter")
        };
        assert_eq!(front.len(), text.len());
        assert_eq!(&front[4..21], "description = \"x\"");
        assert_eq!(body, "# Body\n");
        assert_eq!(split_front_matter("# no front matter").0, None);
        let yaml = "---\nname: r\n---\nYou review.\n";
        assert_eq!(
            split_front_matter(yaml),
            (
                Some(FrontMatter::Yaml {
                    text: "name: r\n",
                    offset: 4
                }),
                "You review.\n"
            )
        );
        // A thematic break later in a body is not front matter.
        assert_eq!(split_front_matter("text\n---\n").0, None);
    }
}

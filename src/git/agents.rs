//! The git an agent's CLI is given: the repository's work tree, index,
//! objects and refs, under a git directory of orch's own (a *shadow*, one
//! per attempt, in the attempt's own folder), so that no configuration an
//! earlier agent planted in `.git` runs in a later one.
//!
//! CLIs run git by themselves: Claude Code runs `git status` as it starts,
//! before the model says anything; Codex and others read the repository
//! for context. git runs programs the repository's config names
//! (`core.fsmonitor`, hooks, clean/smudge/process filters, textconv, diff
//! and merge drivers, a pager), and a confined agent that may write the
//! workspace may write `.git/config`. Without a shadow, a worker's planted
//! `core.fsmonitor` ran inside its judge (and reached the judge's verdict
//! tools) and inside a later `full-access` agent, unconfined.
//!
//! The shadow holds:
//!
//! - `config`: orch's, with only the repository settings that name no
//!   program ([`kept`]: the format and its extensions, how files
//!   compare, the author) copied from the repository's own config (read
//!   without its includes), plus `[submodule "<name>"] ignore = dirty` for
//!   every submodule name git could find (the `.gitmodules` of the work
//!   tree, the index and `HEAD`: [`submodule_names`]) and
//!   `diff.ignoreSubmodules = dirty`, so that `git status` looks into no
//!   submodule (whose own config would run);
//! - `HEAD`: a copy of the repository's (a ref or a commit, nothing else);
//! - a link to every other entry of the repository's git directory
//!   (`objects`, `refs`, `packed-refs`, `logs`, `info`, ...), but `hooks`
//!   and the config files.
//!
//! The CLI gets `GIT_DIR` (the shadow), `GIT_WORK_TREE` (the repository's
//! top folder), `GIT_INDEX_FILE` (the repository's index, so `git add`
//! stays in the repository) and `GIT_CONFIG_PARAMETERS` with
//! `core.fsmonitor=false`, `core.hooksPath=/dev/null` and
//! `safe.bareRepository=explicit`, which git passes on into submodules.
//! What the agent's git changes through the links (objects, refs, the
//! index) is the repository's; a new `HEAD` (a branch checked out) stays in
//! the attempt.
//!
//! No shadow (an empty `GIT_DIR`: git says it is not a repository) when
//! the workspace is in no repository, when its `.git` is a link, when the
//! git directory or its common directory is outside the repository's top
//! folder (a linked worktree, a submodule's), or when the top folder is
//! the user's home or above it (a home kept in git).

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// Config keys copied from the repository's config besides
/// [`super::COMPARE_KEYS`]: the format and its extensions, a sparse
/// checkout, the author. None names a program.
const KEPT_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "extensions.objectformat",
    "extensions.refstorage",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "user.name",
    "user.email",
];

fn kept(key: &str) -> bool {
    KEPT_KEYS.contains(&key) || super::COMPARE_KEYS.contains(&key)
}

/// Entries of the repository's git directory the shadow does not link:
/// its own config and `HEAD` stand in for them; hooks run programs.
const NOT_LINKED: &[&str] = &["config", "config.worktree", "hooks", "commondir", "HEAD"];

/// What git is told on the command line (outranks every file, and is
/// passed on into submodules).
const PARAMETERS: &str =
    "'core.fsmonitor'='false' 'core.hooksPath'='/dev/null' 'safe.bareRepository'='explicit'";

/// The most of a config file orch reads.
const MAX_CONFIG: u64 = 1 << 20;

/// The git directory one attempt's CLI gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentGit {
    /// The shadow, in the attempt's own folder.
    pub(crate) dir: PathBuf,
    repo: Option<Repo>,
}

/// Where a repository keeps what the shadow links to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Repo {
    /// Its top folder (the work tree).
    top: PathBuf,
    /// Its git directory (`HEAD`, the index).
    git_dir: PathBuf,
    /// Where its config, objects and refs are (`git_dir`, but in a linked
    /// worktree).
    common: PathBuf,
}

impl AgentGit {
    /// The plan for an attempt whose own git directory is `dir`, for an
    /// agent working in `workspace`; `home` is the user's. Reads only where
    /// the repository is; nothing is written until [`AgentGit::make`].
    pub(crate) fn plan(workspace: &Path, home: Option<&Path>, dir: PathBuf) -> AgentGit {
        AgentGit {
            dir,
            repo: discover(workspace, home),
        }
    }

    /// The variables the CLI gets.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        let mut env = vec![("GIT_DIR".to_string(), self.dir.display().to_string())];
        if let Some(r) = &self.repo {
            env.push(("GIT_WORK_TREE".into(), r.top.display().to_string()));
            env.push((
                "GIT_INDEX_FILE".into(),
                r.git_dir.join("index").display().to_string(),
            ));
        }
        env.push(("GIT_CONFIG_PARAMETERS".into(), PARAMETERS.into()));
        // No global configuration: the home is the agent's own, and a
        // filter or driver its command put in `~/.gitconfig` would run in
        // the git its CLI starts (OpenCode's snapshots run `git add`).
        env.push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
        env
    }

    /// Fill the shadow (its folder exists and is empty). When the
    /// repository cannot be given this way (its `HEAD` is not a ref or a
    /// commit, its config cannot be read), the folder stays empty: the
    /// CLI works without git.
    pub(crate) fn make(&self) {
        if let Some(r) = &self.repo
            && fill(&self.dir, r).is_none()
        {
            // Half a shadow would be a repository with pieces missing.
            if let Ok(entries) = std::fs::read_dir(&self.dir) {
                for e in entries.flatten() {
                    let p = e.path();
                    let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
                }
            }
        }
    }
}

/// The repository `workspace` is in, found without reading any of its
/// configuration: the nearest folder at or above it that holds `.git`.
fn discover(workspace: &Path, home: Option<&Path>) -> Option<Repo> {
    let real = std::fs::canonicalize(workspace).ok()?;
    let top = real
        .ancestors()
        .find(|a| a.join(".git").symlink_metadata().is_ok())?
        .to_path_buf();
    if let Some(home) = home.and_then(|h| std::fs::canonicalize(h).ok())
        && home.starts_with(&top)
    {
        return None;
    }
    let dot_git = top.join(".git");
    let meta = dot_git.symlink_metadata().ok()?;
    let git_dir = if meta.is_dir() {
        dot_git
    } else if meta.is_file() {
        // `gitdir: <path>`, relative to the top folder.
        let text = crate::beneath::read(&top, Path::new(".git"), 4096).ok()?;
        let text = text.strip_suffix(b"\n").unwrap_or(&text);
        let named = text.strip_prefix(b"gitdir: ")?;
        top.join(OsStr::from_bytes(named))
    } else {
        return None;
    };
    let git_dir = beneath(&top, &git_dir)?;
    let common = match crate::beneath::read(&git_dir, Path::new("commondir"), 4096) {
        Ok(text) => {
            let text = text.strip_suffix(b"\n").unwrap_or(&text);
            beneath(&top, &git_dir.join(OsStr::from_bytes(text)))?
        }
        Err(_) => git_dir.clone(),
    };
    Some(Repo {
        top,
        git_dir,
        common,
    })
}

/// `p` with links resolved, if it is beneath `top`.
fn beneath(top: &Path, p: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(p).ok()?;
    (real.starts_with(top) && real.is_dir()).then_some(real)
}

fn fill(dir: &Path, r: &Repo) -> Option<()> {
    let head = crate::beneath::read(&r.git_dir, Path::new("HEAD"), 1024).ok()?;
    if !valid_head(&head) {
        return None;
    }
    let config = crate::beneath::read(&r.common, Path::new("config"), MAX_CONFIG).ok()?;
    let kept: Vec<(String, Vec<u8>)> = entries(&config)?
        .into_iter()
        .filter_map(|(k, v)| Some((String::from_utf8(k).ok()?, v)))
        .filter(|(k, _)| kept(k))
        .collect();
    std::fs::write(dir.join("HEAD"), &head).ok()?;
    // Without submodules for now: the shadow is read below for the
    // `.gitmodules` of the index and of `HEAD`.
    std::fs::write(dir.join("config"), shadow_config(&kept, &[])).ok()?;
    let mut linked: Vec<std::ffi::OsString> = Vec::new();
    for from in [&r.git_dir, &r.common] {
        for e in std::fs::read_dir(from).ok()?.flatten() {
            let name = e.file_name();
            let skip = NOT_LINKED.iter().any(|n| name == OsStr::new(n))
                || name.as_bytes().ends_with(b".lock")
                || linked.contains(&name);
            if skip {
                continue;
            }
            std::os::unix::fs::symlink(from.join(&name), dir.join(&name)).ok()?;
            linked.push(name);
        }
    }
    let names = submodule_names(dir, r)?;
    let names: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    std::fs::write(dir.join("config"), shadow_config(&kept, &names)).ok()?;
    Some(())
}

/// Every submodule name git could find for a path, so that each gets
/// `ignore = dirty` in the shadow: a name's own `ignore` (from
/// `.gitmodules`, `none` looks into the submodule) outranks
/// `diff.ignoreSubmodules`, and only `submodule.<name>.ignore` in a config
/// file or on the command line outranks it. git reads the work tree's
/// `.gitmodules`, or when there is none the index's, or then `HEAD`'s;
/// these are the names of all three. `None` (no repository for the CLI)
/// when one cannot be read as git would (the work tree's is a link, not a
/// regular file, or too large; a blob too large; a file git cannot parse),
/// or when a name holds a control byte other than a TAB, which a config
/// file may not carry back as it is.
fn submodule_names(dir: &Path, r: &Repo) -> Option<Vec<Vec<u8>>> {
    let mut texts = Vec::new();
    match crate::beneath::read(&r.top, Path::new(".gitmodules"), MAX_CONFIG) {
        Ok(text) => texts.push(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    // The blobs: every stage of the index's entry, and `HEAD`'s.
    let index = shadow_git(dir, r, &["ls-files", "--stage", "-z", "--", ".gitmodules"])?;
    let mut blobs: Vec<Vec<u8>> = index
        .split(|b| *b == 0)
        .filter_map(|e| Some(e.split(|b| *b == b' ').nth(1)?.to_vec()))
        .collect();
    // An unborn `HEAD` has no tree (nor has it for git's fallback).
    if let Some(tree) = shadow_git(dir, r, &["ls-tree", "-z", "HEAD", "--", ".gitmodules"]) {
        blobs.extend(tree.split(|b| *b == 0).filter_map(|e| {
            Some(
                e.split(|b| *b == b' ')
                    .nth(2)?
                    .split(|b| *b == b'\t')
                    .next()?
                    .to_vec(),
            )
        }));
    }
    for oid in blobs {
        let oid = std::str::from_utf8(&oid).ok()?;
        if !oid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let size = shadow_git(dir, r, &["cat-file", "-s", oid])?;
        let size: u64 = std::str::from_utf8(&size).ok()?.trim().parse().ok()?;
        if size > MAX_CONFIG {
            return None;
        }
        texts.push(shadow_git(dir, r, &["cat-file", "blob", oid])?);
    }
    let mut names = Vec::new();
    for text in &texts {
        for (key, _) in entries(text)? {
            let Some(rest) = key.strip_prefix(b"submodule.") else {
                continue;
            };
            let Some(dot) = rest.iter().rposition(|b| *b == b'.') else {
                continue;
            };
            let name = &rest[..dot];
            if name.iter().any(|b| b.is_ascii_control() && *b != b'\t') {
                return None;
            }
            names.push(name.to_vec());
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// git run on the shadow (its config orch's, no other read), for the
/// index and the objects; its output when it succeeded.
fn shadow_git(dir: &Path, r: &Repo, args: &[&str]) -> Option<Vec<u8>> {
    let mut cmd = Command::new(super::program());
    cmd.args(args)
        .current_dir("/")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_DIR", dir)
        .env("GIT_INDEX_FILE", r.git_dir.join("index"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_PARAMETERS", PARAMETERS)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    super::output(cmd)
}

/// A `HEAD` git reads as a ref (`ref: refs/...`) or a commit id.
fn valid_head(head: &[u8]) -> bool {
    let h = head.strip_suffix(b"\n").unwrap_or(head);
    if let Some(r) = h.strip_prefix(b"ref: refs/") {
        return !r.is_empty()
            && r.iter()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'\\' | b':' | b'~' | b'^'));
    }
    matches!(h.len(), 40 | 64) && h.iter().all(u8::is_ascii_hexdigit)
}

/// The shadow's config: the kept settings, submodules looked into by
/// none, then orch's switches.
fn shadow_config(kept: &[(String, Vec<u8>)], modules: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in kept {
        let Some((section, name)) = key.split_once('.') else {
            continue;
        };
        let _ = writeln!(out, "[{section}]");
        out.extend_from_slice(b"\t");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b" = ");
        quoted(&mut out, value);
        out.push(b'\n');
    }
    if !kept
        .iter()
        .any(|(k, _)| k == "core.repositoryformatversion")
    {
        out.extend_from_slice(b"[core]\n\trepositoryformatversion = 0\n");
    }
    out.extend_from_slice(b"[core]\n\tbare = false\n\tfsmonitor = false\n");
    out.extend_from_slice(b"[diff]\n\tignoreSubmodules = dirty\n");
    for name in modules {
        out.extend_from_slice(b"[submodule ");
        quoted_name(&mut out, name);
        out.extend_from_slice(b"]\n\tignore = dirty\n");
    }
    out
}

/// A config value or subsection name in double quotes, escaped.
fn quoted(out: &mut Vec<u8>, v: &[u8]) {
    out.push(b'"');
    for &b in v {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\r' | 0 => {}
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// A subsection name in double quotes: git reads a backslash followed by
/// any byte as that byte (`\t` is `t`, not a TAB), so only `"` and the
/// backslash are escaped.
/// The name holds no control byte but a TAB ([`submodule_names`]).
fn quoted_name(out: &mut Vec<u8>, v: &[u8]) {
    out.push(b'"');
    for &b in v {
        if matches!(b, b'"' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// A config file's entries: key (as bytes: a subsection name need not be
/// UTF-8) and value.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A config file's entries as git reads it (keys lowercased but for the
/// subsection), its includes not followed; `None` when git cannot read
/// it. Parsed by git itself, once per distinct file.
fn entries(text: &[u8]) -> Option<Entries> {
    static SEEN: Mutex<Vec<(Vec<u8>, Entries)>> = Mutex::new(Vec::new());
    if let Some((_, e)) = SEEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(t, _)| t == text)
    {
        return Some(e.clone());
    }
    let mut cmd = Command::new(super::program());
    cmd.args(["config", "--no-includes", "--file", "-", "--list", "-z"])
        .current_dir("/")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // One of orch's own children: the orphan sweep leaves it alone.
    let mut child = crate::children::start(|| {
        let child = cmd.spawn();
        let pid = child.as_ref().ok().map(|c| c.id());
        (child, pid)
    })
    .ok()?;
    let mut stdin = child.stdin.take()?;
    let input = text.to_vec();
    // git reads all of its input before it answers.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stdout = Vec::new();
    let read = child.stdout.take().map(|mut o| {
        use std::io::Read;
        o.read_to_end(&mut stdout)
    });
    // Reaped and forgotten by orch's registry at once.
    let status = crate::children::wait(&mut child);
    let _ = writer.join();
    if !matches!(read, Some(Ok(_))) || !status.ok()?.success() {
        return None;
    }
    let parsed: Entries = stdout
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| match e.iter().position(|b| *b == b'\n') {
            Some(i) => (e[..i].to_vec(), e[i + 1..].to_vec()),
            None => (e.to_vec(), b"true".to_vec()),
        })
        .collect();
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() >= 16 {
        seen.remove(0);
    }
    seen.push((text.to_vec(), parsed.clone()));
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_is_a_ref_or_a_commit() {
        assert!(valid_head(b"ref: refs/heads/main\n"));
        assert!(valid_head(&[b'a'; 40]));
        assert!(!valid_head(b"ref: /etc/passwd\n"));
        assert!(!valid_head(b"ref: refs/heads/a b\n"));
        assert!(!valid_head(b"ref: refs/\n"));
        assert!(!valid_head(b"abc\n"));
    }

    fn git(dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new(crate::git::program())
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "core.fsmonitor=false",
            ])
            .args([
                "-c",
                "protocol.file.allow=always",
                "-c",
                "filter.f.clean=cat",
            ])
            .args(args)
            .output()
            .unwrap()
    }

    /// A repository whose config, and whose submodule's, name programs
    /// (an fsmonitor, a clean filter on racily clean files): `git status`
    /// under the shadow runs none of them and still sees the changes; the
    /// same status with the repository's own git directory runs them (the
    /// control).
    #[test]
    fn nothing_the_repository_names_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let (top, sub, marks) = (root.join("top"), root.join("sub"), root.join("marks"));
        for d in [&top, &sub, &marks] {
            std::fs::create_dir(d).unwrap();
        }
        assert!(git(&sub, &["init", "-q"]).status.success());
        assert!(
            git(&sub, &["commit", "-q", "--allow-empty", "-m", "s"])
                .status
                .success()
        );
        assert!(git(&top, &["init", "-q"]).status.success());
        assert!(
            git(
                &top,
                &["submodule", "add", "-q", sub.to_str().unwrap(), "sub"]
            )
            .status
            .success()
        );
        std::fs::write(top.join(".gitattributes"), "*.txt filter=f\n").unwrap();
        std::fs::write(top.join("a.txt"), "a\n").unwrap();
        assert!(git(&top, &["add", "-A"]).status.success());
        assert!(git(&top, &["commit", "-qm", "one"]).status.success());
        let plant = |config: &Path, what: &str| {
            let mut text = std::fs::read_to_string(config).unwrap();
            text.push_str(&format!(
                "[core]\n\tfsmonitor = \"touch {m}/{what}-fsmonitor; false\"\n\
                 [filter \"f\"]\n\tclean = \"touch {m}/{what}-filter; cat\"\n",
                m = marks.display()
            ));
            std::fs::write(config, text).unwrap();
        };
        plant(&top.join(".git/config"), "top");
        plant(&top.join(".git/modules/sub/config"), "sub");
        std::fs::write(top.join("sub/new.txt"), "n\n").unwrap();
        std::fs::write(top.join("b.txt"), "b\n").unwrap();
        let shadow = root.join("attempt/git");
        std::fs::create_dir_all(&shadow).unwrap();
        let g = AgentGit::plan(&top, None, shadow.clone());
        g.make();
        let status = |env: &[(String, String)]| {
            let out = Command::new(crate::git::program())
                .current_dir(&top)
                .args(["status", "--short"])
                .envs(env.iter().map(|(k, v)| (k, v)))
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        let seen = status(&g.env());
        assert!(seen.contains("?? b.txt"), "{seen}");
        let ran: Vec<_> = std::fs::read_dir(&marks).unwrap().flatten().collect();
        assert!(ran.is_empty(), "{ran:?}");
        assert!(!shadow.join("hooks").exists());
        // The control.
        std::fs::write(top.join("a.txt"), "a\n").unwrap();
        status(&[]);
        let ran: Vec<_> = std::fs::read_dir(&marks).unwrap().flatten().collect();
        assert!(!ran.is_empty());
    }

    /// A `.git` that is a link, or a git directory outside the top folder,
    /// gets no shadow: git in the CLI finds no repository.
    #[test]
    fn a_repository_elsewhere_gets_none() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let (ws, other) = (root.join("ws"), root.join("other"));
        std::fs::create_dir(&ws).unwrap();
        assert!(git(&root, &["init", "-q", "other"]).status.success());
        std::os::unix::fs::symlink(other.join(".git"), ws.join(".git")).unwrap();
        assert_eq!(AgentGit::plan(&ws, None, root.join("s")).repo, None);
        std::fs::remove_file(ws.join(".git")).unwrap();
        std::fs::write(
            ws.join(".git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap();
        assert_eq!(AgentGit::plan(&ws, None, root.join("s")).repo, None);
        // The user's home kept in git: none either.
        std::fs::remove_file(ws.join(".git")).unwrap();
        assert!(git(&ws, &["init", "-q"]).status.success());
        assert!(AgentGit::plan(&ws, None, root.join("s")).repo.is_some());
        assert_eq!(AgentGit::plan(&ws, Some(&ws), root.join("s")).repo, None);
    }

    /// The repository's config is read without its includes: a file it
    /// includes (anywhere on the machine) sets nothing in the shadow.
    /// Plain git reads the include (the control).
    #[test]
    fn an_included_file_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        assert!(git(&ws, &["init", "-q"]).status.success());
        let inc = root.join("elsewhere.cfg");
        std::fs::write(&inc, "[core]\n\tautocrlf = input\n").unwrap();
        assert!(
            git(&ws, &["config", "include.path", inc.to_str().unwrap()])
                .status
                .success()
        );
        let control = git(&ws, &["config", "--get", "core.autocrlf"]);
        assert_eq!(String::from_utf8_lossy(&control.stdout), "input\n");
        let shadow = root.join("attempt/git");
        std::fs::create_dir_all(&shadow).unwrap();
        let g = AgentGit::plan(&ws, None, shadow.clone());
        g.make();
        let config = std::fs::read_to_string(shadow.join("config")).unwrap();
        assert!(!config.contains("autocrlf"), "{config}");
        assert!(config.contains("fsmonitor = false"), "{config}");
    }

    /// A worker's submodule `sub` whose own config names a clean filter (a
    /// tracked file changed at the same size, so `git status` in it runs
    /// the filter), a gitlink in the index, and a `.gitmodules` entry with
    /// `ignore = none`, set up by `gitmodules` in `top`. Returns the
    /// marker the filter leaves.
    fn plant_submodule(root: &Path, top: &Path, gitmodules: impl Fn(&Path)) -> PathBuf {
        let mark = root.join("filter-ran");
        std::fs::create_dir(top).unwrap();
        assert!(git(top, &["init", "-q"]).status.success());
        std::fs::write(top.join("a"), "a\n").unwrap();
        assert!(git(top, &["add", "a"]).status.success());
        assert!(git(top, &["commit", "-qm", "1"]).status.success());
        let sub = top.join("sub");
        std::fs::create_dir(&sub).unwrap();
        assert!(git(&sub, &["init", "-q"]).status.success());
        std::fs::write(sub.join("f"), "hello\n").unwrap();
        std::fs::write(sub.join(".gitattributes"), "* filter=x\n").unwrap();
        assert!(git(&sub, &["add", "f", ".gitattributes"]).status.success());
        assert!(git(&sub, &["commit", "-qm", "s"]).status.success());
        let clean = format!("touch {}; cat", mark.display());
        assert!(
            git(&sub, &["config", "filter.x.clean", &clean])
                .status
                .success()
        );
        std::fs::write(sub.join("f"), "HELLO\n").unwrap();
        let id = git(&sub, &["rev-parse", "HEAD"]).stdout;
        let id = String::from_utf8(id).unwrap();
        let info = format!("160000,{},sub", id.trim());
        assert!(
            git(top, &["update-index", "--add", "--cacheinfo", &info])
                .status
                .success()
        );
        gitmodules(top);
        mark
    }

    /// `git status` in `top` under `env`; whether it succeeded.
    fn status_in(top: &Path, env: &[(String, String)]) -> bool {
        Command::new(crate::git::program())
            .current_dir(top)
            .args(["status", "--short"])
            .env_remove("GIT_DIR")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap()
            .status
            .success()
    }

    /// How a case writes its `.gitmodules`.
    type Plant = dyn Fn(&Path);

    fn entry(name: &[u8]) -> Vec<u8> {
        let mut text = b"[submodule \"".to_vec();
        text.extend_from_slice(name);
        text.extend_from_slice(b"\"]\n\tpath = sub\n\turl = ./sub\n\tignore = none\n");
        text
    }

    /// Every way git finds a submodule's name that orch once missed: a
    /// `.gitmodules` only in the index, or only in `HEAD` (git falls back
    /// to them when the work tree has none), a name holding a TAB (once
    /// written `a\tb`, which git reads as `atb`), a name that is not UTF-8.
    /// Under the shadow `git status` looks into no submodule: the
    /// submodule's filter does not run. Plain git runs it (the control).
    #[test]
    fn every_submodule_name_git_finds_is_looked_into_by_none() {
        let cases: [(&str, &Plant); 4] = [
            ("index", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"s")).unwrap();
                assert!(git(top, &["add", ".gitmodules"]).status.success());
                std::fs::remove_file(top.join(".gitmodules")).unwrap();
            }),
            ("head", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"s")).unwrap();
                assert!(git(top, &["add", ".gitmodules"]).status.success());
                assert!(git(top, &["commit", "-qm", "m"]).status.success());
                let rm = git(top, &["rm", "-q", "--cached", ".gitmodules"]);
                assert!(rm.status.success());
                std::fs::remove_file(top.join(".gitmodules")).unwrap();
            }),
            ("tab", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"a\tb")).unwrap();
            }),
            ("not utf-8", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"a\xffb")).unwrap();
            }),
        ];
        for (what, gitmodules) in cases {
            let (_tmp, top, mark, shadow, g) = planted(gitmodules);
            assert!(shadow.join("HEAD").exists(), "{what}: no shadow");
            assert!(status_in(&top, &g.env()), "{what}");
            assert!(!mark.exists(), "{what}: the submodule's filter ran");
            // The control.
            assert!(status_in(&top, &[]), "{what}");
            assert!(mark.exists(), "{what}: the plant did not run");
        }
    }

    /// A repository with a submodule planted as `gitmodules` says, and an
    /// agent's git shadow made for it: (its folder, the repository, the
    /// mark the filter leaves, the shadow, the plan).
    fn planted(gitmodules: &Plant) -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, AgentGit) {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let top = root.join("top");
        let mark = plant_submodule(&root, &top, gitmodules);
        let shadow = root.join("attempt/git");
        std::fs::create_dir_all(&shadow).unwrap();
        let g = AgentGit::plan(&top, None, shadow.clone());
        g.make();
        (tmp, top, mark, shadow, g)
    }

    /// A name a config file cannot carry back (a control byte), or a
    /// `.gitmodules` orch cannot read as git does (a link): no shadow, and
    /// git in the CLI finds no repository. Plain git runs the filter (the
    /// control).
    #[test]
    fn a_gitmodules_orch_cannot_read_as_git_does_gets_no_repository() {
        let cases: [(&str, &Plant); 3] = [
            ("CR", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"a\rb")).unwrap();
            }),
            ("control", &|top: &Path| {
                std::fs::write(top.join(".gitmodules"), entry(b"a\x01b")).unwrap();
            }),
            ("link", &|top: &Path| {
                let real = top.join("pl.cfg");
                std::fs::write(&real, entry(b"s")).unwrap();
                std::os::unix::fs::symlink(&real, top.join(".gitmodules")).unwrap();
            }),
        ];
        for (what, gitmodules) in cases {
            let (_tmp, top, mark, shadow, g) = planted(gitmodules);
            let left: Vec<_> = std::fs::read_dir(&shadow).unwrap().flatten().collect();
            assert!(left.is_empty(), "{what}: {left:?}");
            assert!(!status_in(&top, &g.env()), "{what}");
            assert!(!mark.exists(), "{what}: the submodule's filter ran");
            assert!(status_in(&top, &[]), "{what}");
            assert!(mark.exists(), "{what}: the plant did not run");
        }
    }

    #[test]
    fn values_and_names_are_quoted() {
        let cfg = shadow_config(
            &[("user.name".into(), b"a\"b\\c\nd".to_vec())],
            &[b"we\"ird".as_slice()],
        );
        let text = String::from_utf8(cfg).unwrap();
        assert!(
            text.contains("[user]\n\tname = \"a\\\"b\\\\c\\nd\"\n"),
            "{text}"
        );
        assert!(
            text.contains("[submodule \"we\\\"ird\"]\n\tignore = dirty\n"),
            "{text}"
        );
        // A TAB stays a TAB: git reads `\t` in a subsection name as `t`.
        let cfg = shadow_config(&[], &[b"a\tb\\c".as_slice()]);
        let text = String::from_utf8(cfg).unwrap();
        assert!(text.contains("[submodule \"a\tb\\\\c\"]\n"), "{text}");
        assert!(text.contains("fsmonitor = false"));
    }
}

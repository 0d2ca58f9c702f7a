//! What orch asks git about a workspace (the MCP tools' files changed, the
//! prompts' branch and diff): read-only commands, no locks taken, and no
//! program started on the workspace's say.
//!
//! orch runs unconfined, and an agent may write the workspace, `.git`
//! included: its config (and every file it includes), hooks, attributes,
//! `info/`, the submodules' repositories. git starts programs such
//! configuration names: `core.fsmonitor`, clean, smudge and process
//! filters, textconv, diff and merge drivers, `diff.external`, hooks,
//! pagers, and in a dirty submodule a `git status` that reads the
//! submodule's own config. The config and `.git` also decide where git
//! reads (`core.worktree`, a `.git` file, `commondir`, alternates, links
//! in `.git`), and orch may read what no agent can. So:
//!
//! - orch finds the work tree itself, without the config (the workspace
//!   or its nearest ancestor holding `.git`), names it and the git
//!   directory on every call, and reads nothing when git would read
//!   outside it ([`Git::find_repo`]), saying why: once on orch's standard
//!   error, and through [`refusal`] in a judge's prompt and the MCP tools'
//!   notes.
//! - The commands that read the work tree (`diff`, `ls-files`) run against
//!   a git directory orch makes for the call in a private temporary folder
//!   (a *shadow*): its `HEAD` is the commit to compare with, its config
//!   only says which object format the repository uses, and the index,
//!   objects and `info/` (excludes, attributes) are the repository's. The
//!   repository's config, its includes, system and global config are not
//!   read (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
//!   `GIT_ATTR_NOSYSTEM`); the few [`inert`] keys that change how files
//!   compare or which are ignored are copied from the effective config
//!   (none names a program): the user's files with their includes, the
//!   repository's without (`--no-includes`), and a file the repository's
//!   config names for git to read only when it lies in the repository. With no driver, filter, fsmonitor, hook or
//!   pager defined, an attribute naming one does nothing. Submodules are
//!   compared by commit only (`--ignore-submodules=dirty`: nothing runs in
//!   them).
//! - The commands that only read refs and config files (`rev-parse`,
//!   `symbolic-ref`, `config --list`) run in the repository orch checked,
//!   with [`SWITCHES`] that keep code off whatever its config says.
//!
//! Every call: standard input closed, no optional locks, no lazy fetch,
//! no terminal prompt, none of orch's own `GIT_*` variables but
//! [`KEEP_ENV`], a revision never taken for an option.

pub(crate) mod agents;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `git` orch runs: found once on orch's `PATH` past relative folders
/// and those that may lead into the workspace, where an agent could have
/// put a program of that name, and orch runs git unconfined (see
/// [`crate::path_env::orchs_path`]; what git starts, an ssh or a
/// credential helper, is looked up there too).
pub(crate) fn program() -> &'static Path {
    static GIT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    GIT.get_or_init(|| {
        let here = crate::path_env::here();
        here.find("git", crate::path_env::orchs_path(), Path::new("/"))
            .unwrap_or_else(|| PathBuf::from("/usr/bin/git"))
    })
}

/// The commit checked out in `workspace`, or `None` outside a git
/// repository (or one with no commit yet).
pub(crate) fn head(workspace: &Path) -> Option<String> {
    Git::new(workspace).commit("HEAD")
}

/// The working tree's changes against HEAD (staged and not), as a diff;
/// `None` outside a git repository. A submodule shows only when its
/// commit changed, not when its own work tree did.
pub(crate) fn diff(workspace: &Path) -> Option<String> {
    Git::new(workspace).diff()
}

/// The branch checked out in `workspace` (`None` when detached or
/// outside a git repository).
pub(crate) fn branch(workspace: &Path) -> Option<String> {
    Git::new(workspace).branch()
}

/// The files changed since `since` (a commit): the committed diff from it
/// to the working tree (staged and unstaged included) and the untracked
/// files git does not ignore, sorted, each once. `None` when git cannot
/// tell, or `since` is not a commit.
pub(crate) fn changed_since(workspace: &Path, since: &str) -> Option<Vec<String>> {
    Git::new(workspace).changed_since(since)
}

/// Why orch does not read the git repository `workspace` is in: it, or
/// its `.git`, points git outside its work tree (see [`Git::find_repo`]).
/// `None` when orch reads it, or when there is no repository.
pub(crate) fn refusal(workspace: &Path) -> Option<String> {
    Git::new(workspace).refusal()
}

/// orch's own `GIT_*` variables a call keeps: where git finds its
/// programs and where repository discovery stops. The rest (`GIT_DIR`,
/// `GIT_CONFIG_PARAMETERS`, `GIT_EXTERNAL_DIFF`, `GIT_PAGER`, ...) would
/// change what the call reads or runs.
const KEEP_ENV: &[&str] = &[
    "GIT_EXEC_PATH",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/// On every call, before the command: no pager, no fsmonitor, no hooks,
/// no embedded bare repository, no transport (so no lazy fetch), no
/// submodule recursion. Command-line config outranks any file's.
const SWITCHES: &[&str] = &[
    "--no-pager",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "safe.bareRepository=explicit",
    "-c",
    "protocol.allow=never",
    "-c",
    "submodule.recurse=false",
];

/// The diff options that keep drivers off even if one were defined.
const NO_DRIVERS: &[&str] = &[
    "--no-ext-diff",
    "--no-textconv",
    "--ignore-submodules=dirty",
];

/// Config keys that say how work-tree files compare with the index
/// (line endings, case, modes, links, stat data, quoting, large files):
/// none names a program. Both shadows copy them, orch's own (here) and
/// the agents' ([`agents`]).
pub(crate) const COMPARE_KEYS: &[&str] = &[
    "core.autocrlf",
    "core.eol",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.filemode",
    "core.symlinks",
    "core.trustctime",
    "core.checkstat",
    "core.quotepath",
    "core.bigfilethreshold",
];

/// Config keys copied from the repository's effective config into the
/// shadow's: the [`COMPARE_KEYS`], and which untracked files are ignored
/// ([`READ_FILES`], only read).
fn inert(key: &str) -> bool {
    COMPARE_KEYS.contains(&key) || READ_FILES.contains(&key)
}

struct Git<'a> {
    workspace: &'a Path,
    /// Variables set on every call after orch's are filtered (tests point
    /// `HOME` and the system config elsewhere).
    env: Vec<(OsString, OsString)>,
    /// The repository, found once per call ([`Git::find_repo`]).
    repo: std::cell::OnceCell<Option<Repo>>,
}

/// The repository orch reads, found without its config: the work tree is
/// the workspace or its nearest ancestor holding `.git`, and every path
/// git reads for orch (git directory, common directory, index, objects
/// and their alternates, refs, `info/`) lies in it, or for a linked
/// worktree in its main repository's git directory. All canonical.
#[derive(Debug)]
struct Repo {
    /// The work tree: the workspace or its nearest ancestor with `.git`.
    top: PathBuf,
    /// `top/.git`, or the linked worktree's folder in the main repository
    /// (`.git/worktrees/NAME`).
    git_dir: PathBuf,
    /// Where objects, refs, config and `info/` are: `git_dir`, or the main
    /// repository's `.git` for a linked worktree.
    common: PathBuf,
}

impl Repo {
    /// Whether `p` (canonical) lies where this repository may be read.
    fn holds(&self, p: &Path) -> bool {
        p.starts_with(&self.top) || p.starts_with(&self.common)
    }

    /// Whether the file a config value names (`~/` is the home, a
    /// relative path is from the work tree), links resolved, lies where
    /// this repository may be read.
    fn holds_file(&self, value: &[u8]) -> bool {
        if value.starts_with(b"~") {
            return false;
        }
        canonical(&self.top.join(OsStr::from_bytes(value))).is_some_and(|p| self.holds(&p))
    }
}

/// Config keys that name a file git reads (which untracked files are
/// ignored, and attributes).
const READ_FILES: &[&str] = &["core.excludesfile", "core.attributesfile"];

/// The entries of `git config --list -z --show-scope` output whose scope
/// is one of `scopes`: key and value (`true` for a bare boolean).
fn scoped<'b>(listing: &'b [u8], scopes: &[&str]) -> Vec<(&'b [u8], &'b [u8])> {
    let mut out = Vec::new();
    let mut fields = listing.split(|b| *b == 0);
    while let (Some(scope), Some(entry)) = (fields.next(), fields.next()) {
        if !scopes.iter().any(|s| s.as_bytes() == scope) {
            continue;
        }
        // `key\nvalue`, or `key` alone for a bare boolean.
        out.push(match entry.iter().position(|b| *b == b'\n') {
            Some(i) => (&entry[..i], &entry[i + 1..]),
            None => (entry, &b"true"[..]),
        });
    }
    out
}

/// How many alternates deep git follows (its own limit).
const ALTERNATES_DEPTH: usize = 5;

/// A git directory of orch's own for one call: the repository's work
/// tree, index and objects, none of its config.
struct Shadow<'r> {
    dir: tempfile::TempDir,
    repo: &'r Repo,
    /// The [`inert`] keys the repository sets, with their values.
    config: Vec<(String, OsString)>,
}

impl<'a> Git<'a> {
    fn new(workspace: &'a Path) -> Self {
        Git {
            workspace,
            env: Vec::new(),
            repo: std::cell::OnceCell::new(),
        }
    }

    fn diff(&self) -> Option<String> {
        let head = self.commit("HEAD")?;
        let shadow = self.shadow(&head)?;
        let mut args = vec!["diff", "--no-color"];
        args.extend(NO_DRIVERS);
        args.extend([head.as_str(), "--"]);
        self.in_shadow(&shadow, &args)
    }

    fn branch(&self) -> Option<String> {
        let out = self.read(&["symbolic-ref", "--quiet", "--short", "HEAD"])?;
        let b = String::from_utf8_lossy(&out).trim().to_string();
        (!b.is_empty()).then_some(b)
    }

    fn changed_since(&self, since: &str) -> Option<Vec<String>> {
        let since = self.commit(since)?;
        let shadow = self.shadow(&since)?;
        let mut args = vec!["diff", "--name-only", "--no-renames"];
        args.extend(NO_DRIVERS);
        args.extend([since.as_str(), "--"]);
        let diff = self.in_shadow(&shadow, &args)?;
        let new = self.in_shadow(&shadow, &["ls-files", "--others", "--exclude-standard"])?;
        let mut files: Vec<String> = diff
            .lines()
            .chain(new.lines())
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        files.sort();
        files.dedup();
        Some(files)
    }

    /// The full object name of the commit `rev` names; `None` for
    /// anything else (an option included).
    fn commit(&self, rev: &str) -> Option<String> {
        if rev.is_empty() || rev.starts_with('-') {
            return None;
        }
        let out = self.read(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])?;
        let h = String::from_utf8_lossy(&out).trim().to_string();
        (matches!(h.len(), 40 | 64) && h.bytes().all(|b| b.is_ascii_hexdigit())).then_some(h)
    }

    /// The shadow for comparing the work tree with `commit`; `None` when
    /// the repository cannot be read that way (a bare one, an object
    /// format git does not name, a temporary folder inside the workspace,
    /// or any refusal of [`Git::find_repo`]).
    fn shadow(&self, commit: &str) -> Option<Shadow<'_>> {
        let repo = self.repo()?;
        // The user's config (system, global) as git reads it, includes
        // and all; the repository's (local, worktree), which is the
        // agents' to write, without its includes, which may name any file.
        let users = self.read(&["config", "--list", "-z", "--show-scope"])?;
        let repos = self.read(&["config", "--list", "-z", "--show-scope", "--no-includes"])?;
        let mut config: Vec<(String, OsString)> = Vec::new();
        let mut format: Option<String> = None;
        let listed = scoped(&users, &["system", "global"])
            .into_iter()
            .map(|(k, v)| (k, v, false))
            .chain(
                scoped(&repos, &["local", "worktree"])
                    .into_iter()
                    .map(|(k, v)| (k, v, true)),
            );
        for (key, value, the_repos) in listed {
            let key = String::from_utf8_lossy(key).to_ascii_lowercase();
            if key == "extensions.objectformat" {
                format = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
            } else if inert(&key) {
                // A file the repository names is read only inside it.
                if the_repos && READ_FILES.contains(&key.as_str()) && !repo.holds_file(value) {
                    continue;
                }
                config.retain(|(k, _)| *k != key);
                config.push((key, OsStr::from_bytes(value).to_os_string()));
            }
        }
        let format = match format.as_deref() {
            None | Some("sha1") => None,
            Some("sha256") => Some("sha256"),
            Some(_) => return None,
        };
        let dir = tempfile::Builder::new()
            .prefix("orch-git-")
            .tempdir()
            .ok()?;
        // A shadow the agents could write would be theirs to fill.
        let real = dir.path().canonicalize().ok()?;
        let inside = |p: &Path| p.canonicalize().is_ok_and(|p| real.starts_with(p));
        if inside(self.workspace) || inside(&repo.top) || inside(&repo.common) {
            return None;
        }
        std::fs::write(real.join("HEAD"), format!("{commit}\n")).ok()?;
        std::fs::create_dir(real.join("refs")).ok()?;
        let config_text = match format {
            Some(f) => format!(
                "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = {f}\n"
            ),
            None => "[core]\n\trepositoryformatversion = 0\n\tbare = false\n".to_string(),
        };
        std::fs::write(real.join("config"), config_text).ok()?;
        // Excludes and attributes: files git reads, naming nothing it runs
        // ([`Git::find_repo`] checked that no link is on the way).
        let info = repo.common.join("info");
        if info.is_dir() {
            std::os::unix::fs::symlink(&info, real.join("info")).ok()?;
        }
        Some(Shadow { dir, repo, config })
    }

    /// `git ARGS` in the workspace against `shadow`: the repository's
    /// config, system and global config unread; the work tree, index and
    /// objects are the ones [`Git::find_repo`] checked.
    fn in_shadow(&self, shadow: &Shadow, args: &[&str]) -> Option<String> {
        let mut cmd = self.command();
        cmd.args(args)
            .env("GIT_DIR", shadow.dir.path())
            .env("GIT_WORK_TREE", &shadow.repo.top)
            .env("GIT_INDEX_FILE", shadow.repo.git_dir.join("index"))
            .env("GIT_OBJECT_DIRECTORY", shadow.repo.common.join("objects"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env("GIT_CONFIG_COUNT", shadow.config.len().to_string());
        for (i, (k, v)) in shadow.config.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), k)
                .env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        output(cmd).map(|o| String::from_utf8_lossy(&o).into_owned())
    }

    /// `git ARGS` in the repository [`Git::find_repo`] found and checked
    /// (named by `GIT_DIR` and `GIT_WORK_TREE`, so nothing changed since
    /// can point git elsewhere), for commands that read refs and config
    /// files only. `None` when it refused the repository.
    fn read(&self, args: &[&str]) -> Option<Vec<u8>> {
        let repo = self.repo()?;
        let mut cmd = self.command();
        cmd.args(args)
            .env("GIT_DIR", &repo.git_dir)
            .env("GIT_WORK_TREE", &repo.top);
        output(cmd)
    }

    fn repo(&self) -> Option<&Repo> {
        self.repo
            .get_or_init(|| match self.find_repo() {
                Ok(repo) => Some(repo),
                Err(Some(why)) => {
                    warn_once(&why);
                    None
                }
                Err(None) => None,
            })
            .as_ref()
    }

    /// Why orch does not read the repository the workspace is in (`None`
    /// when it does, or when there is none).
    fn refusal(&self) -> Option<String> {
        self.find_repo().err().flatten()
    }

    /// The repository the workspace is in, found without its config: the
    /// work tree is the workspace or its nearest ancestor holding `.git`
    /// (not the `core.worktree` the config may name). `Err(None)` when
    /// there is none; `Err(Some(why))`, so no call reads anything, when
    /// git itself would read elsewhere or something git reads for orch
    /// lies outside that work tree:
    ///
    /// - the repository sets `core.worktree`, or git's own answers (found
    ///   as git finds them, config and all) differ from orch's: the top
    ///   level, the git directory, the common directory (a `commondir`
    ///   file), the index or the objects;
    /// - `.git` is a link, or a file (`gitdir: ...`) that is not a linked
    ///   worktree's: a linked worktree's folder names this `.git` back in
    ///   its `gitdir` file and lies in `worktrees/` of its common
    ///   directory (a submodule's, and any other, is refused);
    /// - a link where git reads for orch: `HEAD`, `index`, `packed-refs`,
    ///   `commondir`, `refs/`, `objects/`, `info/` (anything in them);
    /// - an alternate object store (`objects/info/alternates`, quoted or
    ///   not) outside the work tree (and the linked worktree's common
    ///   directory), or one holding a link, or more than git's five deep.
    fn find_repo(&self) -> Result<Repo, Option<String>> {
        let ws = self.workspace.canonicalize().map_err(|_| None)?;
        let top = ws
            .ancestors()
            .find(|d| d.join(".git").symlink_metadata().is_ok())
            .ok_or(None)?
            .to_path_buf();
        let dot = top.join(".git");
        let kind = dot.symlink_metadata().map_err(|_| None)?.file_type();
        let (git_dir, common) = if kind.is_dir() {
            (dot.clone(), dot.clone())
        } else if kind.is_file() {
            linked_worktree(&top).ok_or_else(|| {
                refused(format!(
                    "`{}` is a file that names no linked worktree (`git worktree add`) of a repository: a submodule's checkout or a repository elsewhere (run orch in the superproject)",
                    dot.display()
                ))
            })?
        } else if kind.is_symlink() {
            return Err(refused(format!("`{}` is a link", dot.display())));
        } else {
            return Err(refused(format!(
                "`{}` is neither a folder nor a file",
                dot.display()
            )));
        };
        let repo = Repo {
            top,
            git_dir,
            common,
        };
        for dir in [&repo.git_dir, &repo.common] {
            for file in ["HEAD", "index", "packed-refs", "commondir"] {
                let p = dir.join(file);
                if p.symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
                {
                    return Err(refused(format!("`{}` is a link", p.display())));
                }
            }
            for (sub, depth) in [("refs", 32), ("info", 4)] {
                no_links(&dir.join(sub), depth).map_err(refused)?;
            }
        }
        objects_held(&repo, &repo.common.join("objects"), 0).map_err(refused)?;
        // What git finds on its own, the repository's config and
        // `commondir` included, must be what orch found.
        let mut cmd = self.command();
        cmd.args([
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--absolute-git-dir",
            "--git-common-dir",
            "--git-path",
            "index",
            "--git-path",
            "objects",
        ]);
        let out = output(cmd).ok_or_else(|| {
            refused("git cannot tell where the repository is (`git rev-parse` failed)".into())
        })?;
        // One path a line: a path with a line break in it makes more.
        let lines: Vec<&[u8]> = out
            .strip_suffix(b"\n")
            .unwrap_or(&out)
            .split(|b| *b == b'\n')
            .collect();
        let [top, git_dir, common, index, objects] = lines[..] else {
            return Err(refused(
                "git names its paths with line breaks in them".into(),
            ));
        };
        for (what, theirs, ours) in [
            ("work tree", top, repo.top.clone()),
            ("git directory", git_dir, repo.git_dir.clone()),
            ("common git directory", common, repo.common.clone()),
            ("index", index, repo.git_dir.join("index")),
            ("object store", objects, repo.common.join("objects")),
        ] {
            let theirs = Path::new(OsStr::from_bytes(theirs));
            if canonical(theirs).as_deref() != Some(ours.as_path()) {
                return Err(refused(format!(
                    "git, as the repository's config and `.git` direct it, reads another {what} (`{}`) than the one orch found (`{}`)",
                    theirs.display(),
                    ours.display()
                )));
            }
        }
        // `core.worktree` set at all, in any file git reads for the
        // repository, even to the work tree orch found: orch decides it.
        // (git takes it from the files themselves, not their includes.)
        let mut cmd = self.command();
        cmd.args(["config", "--no-includes", "--get-all", "core.worktree"])
            .env("GIT_DIR", &repo.git_dir);
        if output(cmd).is_some() {
            return Err(refused(
                "the repository's config sets `core.worktree`, which orch does not follow".into(),
            ));
        }
        Ok(repo)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(program());
        for (k, _) in std::env::vars_os() {
            if k.as_encoded_bytes().starts_with(b"GIT_")
                && !KEEP_ENV.iter().any(|keep| k == OsStr::new(keep))
            {
                cmd.env_remove(k);
            }
        }
        cmd.args(SWITCHES)
            .current_dir(self.workspace)
            .env("PATH", crate::path_env::orchs_path())
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }
}

/// `p` with every link resolved; a file that does not exist (an index
/// not written yet) is its canonical folder and its name.
fn canonical(p: &Path) -> Option<PathBuf> {
    match p.canonicalize() {
        Ok(c) => Some(c),
        Err(_) if p.symlink_metadata().is_err() => {
            Some(p.parent()?.canonicalize().ok()?.join(p.file_name()?))
        }
        Err(_) => None,
    }
}

/// The git directory and common directory of the linked worktree whose
/// `.git` file is in `top`, each canonical; `None` for any other `.git`
/// file (a submodule's names no way back).
fn linked_worktree(top: &Path) -> Option<(PathBuf, PathBuf)> {
    let read = |dir: &Path, name: &str| -> Option<PathBuf> {
        let bytes = crate::beneath::read(dir, Path::new(name), 4096).ok()?;
        let text = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        (!text.is_empty() && !text.contains(&b'\n'))
            .then(|| dir.join(OsStr::from_bytes(text)).canonicalize().ok())?
    };
    let bytes = crate::beneath::read(top, Path::new(".git"), 4096).ok()?;
    let named = bytes.strip_prefix(b"gitdir: ")?;
    let named = named.strip_suffix(b"\n").unwrap_or(named);
    if named.is_empty() || named.contains(&b'\n') {
        return None;
    }
    let git_dir = top.join(OsStr::from_bytes(named)).canonicalize().ok()?;
    let back = read(&git_dir, "gitdir")?;
    let common = read(&git_dir, "commondir")?;
    (back == top.join(".git") && git_dir.parent()? == common.join("worktrees"))
        .then_some((git_dir, common))
}

/// `Ok` when nothing at or under `dir` (at most `depth` folders down) is
/// a link (a `dir` that does not exist holds none); else why not.
fn no_links(dir: &Path, depth: usize) -> Result<(), String> {
    let Ok(meta) = dir.symlink_metadata() else {
        return Ok(());
    };
    let link = |p: &Path| format!("`{}` is a link", p.display());
    let unread = |p: &Path| format!("`{}` cannot be read", p.display());
    if meta.file_type().is_symlink() {
        return Err(link(dir));
    }
    if !meta.is_dir() {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|_| unread(dir))?;
    for entry in entries {
        let entry = entry.map_err(|_| unread(dir))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|_| unread(&path))?;
        if kind.is_symlink() {
            return Err(link(&path));
        }
        if kind.is_dir() {
            if depth == 0 {
                return Err(format!(
                    "`{}` is deeper than git keeps folders there",
                    path.display()
                ));
            }
            no_links(&path, depth - 1)?;
        }
    }
    Ok(())
}

/// `Ok` when the object store `objects` (canonical) holds no link and
/// each of its alternates lies where `repo` may be read and holds none,
/// at most [`ALTERNATES_DEPTH`] deep; else why not.
fn objects_held(repo: &Repo, objects: &Path, depth: usize) -> Result<(), String> {
    if depth > ALTERNATES_DEPTH {
        return Err(format!(
            "its alternate object stores go more than {ALTERNATES_DEPTH} deep"
        ));
    }
    if !repo.holds(objects) {
        return Err(format!(
            "its alternate object store `{}` is outside the work tree",
            objects.display()
        ));
    }
    if !objects.is_dir() {
        return Err(format!(
            "its object store `{}` is not a folder",
            objects.display()
        ));
    }
    // objects/xx/..., pack/..., info/commit-graphs/...
    no_links(objects, 3)?;
    let list = match crate::beneath::read(objects, Path::new("info/alternates"), 1 << 16) {
        Ok(list) => list,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "`{}` cannot be read: {e}",
                objects.join("info/alternates").display()
            ));
        }
    };
    for line in list.split(|b| *b == b'\n') {
        if line.is_empty() || line.starts_with(b"#") {
            continue;
        }
        // A quoted path (C-style) is not worth unquoting: refused.
        if line.starts_with(b"\"") {
            return Err(format!(
                "`{}` names a quoted path",
                objects.join("info/alternates").display()
            ));
        }
        let named = objects.join(OsStr::from_bytes(line));
        let alternate = named.canonicalize().map_err(|_| {
            format!(
                "its alternate object store `{}` does not exist",
                named.display()
            )
        })?;
        objects_held(repo, &alternate, depth + 1)?;
    }
    Ok(())
}

/// Why orch refuses a repository, for [`Git::find_repo`]'s error.
fn refused(why: String) -> Option<String> {
    Some(why)
}

/// Say on orch's standard error, once per reason, that a repository is
/// not read (a judge's prompt then has no diff, `complete_task` no files
/// changed, and the user should know why).
fn warn_once(why: &str) {
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.iter().any(|s| s == why) {
        return;
    }
    said.push(why.to_string());
    eprintln!(
        "warning: orch does not read this git repository: {why}. Judges get no diff, and complete_task no files changed (see docs/confinement.md, \"What orch itself runs in the workspace\")"
    );
}

/// How long one git command may take: a FIFO or a huge file an agent put
/// where git reads (`.git/config`, the index) must not stall the run.
const GIT_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Run `cmd` as one of orch's own children (the orphan sweep leaves it
/// alone), at most [`GIT_LIMIT`]; its output when it succeeded.
fn output(mut cmd: Command) -> Option<Vec<u8>> {
    use std::io::Read;
    cmd.stdout(Stdio::piped());
    let mut child = crate::children::start(|| {
        let child = cmd.spawn();
        let pid = child.as_ref().ok().map(|c| c.id());
        (child, pid)
    })
    .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let started = std::time::Instant::now();
    let status = loop {
        // Reaped and forgotten by orch's registry at once.
        match crate::children::try_wait(&mut child) {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > GIT_LIMIT => {
                let _ = child.kill();
                let _ = crate::children::wait(&mut child);
                break None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(_) => break None,
        }
    };
    let out = reader.join().ok()?;
    status?.success().then_some(out)
}

#[cfg(test)]
mod tests;

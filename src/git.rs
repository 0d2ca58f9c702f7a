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
//! submodule's own config. So:
//!
//! - The commands that read the work tree (`diff`, `ls-files`) run against
//!   a git directory orch makes for the call in a private temporary folder
//!   (a *shadow*): its `HEAD` is the commit to compare with, its config
//!   only says which object format the repository uses, and the index,
//!   objects and `info/` (excludes, attributes) are the repository's. The
//!   repository's config, its includes, system and global config are not
//!   read (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`,
//!   `GIT_ATTR_NOSYSTEM`); the few [`INERT_KEYS`] that change how files
//!   compare or which are ignored are copied from the effective config
//!   (none names a program). With no driver, filter, fsmonitor, hook or
//!   pager defined, an attribute naming one does nothing. Submodules are
//!   compared by commit only (`--ignore-submodules=dirty`: nothing runs in
//!   them).
//! - The commands that only read refs and config files (`rev-parse`,
//!   `symbolic-ref`, `config --list`) run in the repository as it is, with
//!   [`SWITCHES`] that keep code off whatever its config says.
//!
//! Every call: standard input closed, no optional locks, no lazy fetch,
//! no terminal prompt, none of orch's own `GIT_*` variables but
//! [`KEEP_ENV`], a revision never taken for an option.

pub mod agents;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The commit checked out in `workspace`, or `None` outside a git
/// repository (or one with no commit yet).
pub fn head(workspace: &Path) -> Option<String> {
    Git::new(workspace).commit("HEAD")
}

/// The working tree's changes against HEAD (staged and not), as a diff;
/// `None` outside a git repository. A submodule shows only when its
/// commit changed, not when its own work tree did.
pub fn diff(workspace: &Path) -> Option<String> {
    Git::new(workspace).diff()
}

/// The branch checked out in `workspace` (`None` when detached or
/// outside a git repository).
pub fn branch(workspace: &Path) -> Option<String> {
    Git::new(workspace).branch()
}

/// The files changed since `since` (a commit): the committed diff from it
/// to the working tree (staged and unstaged included) and the untracked
/// files git does not ignore, sorted, each once. `None` when git cannot
/// tell, or `since` is not a commit.
pub fn changed_since(workspace: &Path, since: &str) -> Option<Vec<String>> {
    Git::new(workspace).changed_since(since)
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

/// Config keys copied from the repository's effective config into the
/// shadow's: how work-tree files compare with the index and which
/// untracked files are ignored. None names a program; the two files
/// (`core.excludesFile`, `core.attributesFile`) are only read.
const INERT_KEYS: &[&str] = &[
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
    "core.excludesfile",
    "core.attributesfile",
];

struct Git<'a> {
    workspace: &'a Path,
    /// Variables set on every call after orch's are filtered (tests point
    /// `HOME` and the system config elsewhere).
    env: Vec<(OsString, OsString)>,
}

/// A git directory of orch's own for one call: the repository's work
/// tree, index and objects, none of its config.
struct Shadow {
    dir: tempfile::TempDir,
    top: PathBuf,
    index: PathBuf,
    objects: PathBuf,
    /// The [`INERT_KEYS`] the repository sets, with their values.
    config: Vec<(String, OsString)>,
}

impl<'a> Git<'a> {
    fn new(workspace: &'a Path) -> Self {
        Git {
            workspace,
            env: Vec::new(),
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
    /// format git does not name, a temporary folder inside the workspace).
    fn shadow(&self, commit: &str) -> Option<Shadow> {
        let out = self.read(&[
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--git-common-dir",
            "--git-path",
            "index",
            "--git-path",
            "objects",
        ])?;
        // One path a line: a path with a line break in it makes more.
        let lines: Vec<&[u8]> = out.strip_suffix(b"\n")?.split(|b| *b == b'\n').collect();
        let [top, common, index, objects] = lines[..] else {
            return None;
        };
        let path = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
        let (top, common, index, objects) = (path(top), path(common), path(index), path(objects));
        let listing = self.read(&["config", "--list", "-z"])?;
        let mut config: Vec<(String, OsString)> = Vec::new();
        let mut format: Option<String> = None;
        for entry in listing.split(|b| *b == 0).filter(|e| !e.is_empty()) {
            // `key\nvalue`, or `key` alone for a bare boolean.
            let (key, value) = match entry.iter().position(|b| *b == b'\n') {
                Some(i) => (&entry[..i], &entry[i + 1..]),
                None => (entry, &b"true"[..]),
            };
            let key = String::from_utf8_lossy(key).to_ascii_lowercase();
            if key == "extensions.objectformat" {
                format = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
            } else if INERT_KEYS.contains(&key.as_str()) {
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
        if inside(self.workspace) || inside(&top) || inside(&common) {
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
        // Excludes and attributes: files git reads, naming nothing it runs.
        let info = common.join("info");
        if info.is_dir() {
            std::os::unix::fs::symlink(&info, real.join("info")).ok()?;
        }
        Some(Shadow {
            dir,
            top,
            index,
            objects,
            config,
        })
    }

    /// `git ARGS` in the workspace against `shadow`: the repository's
    /// config, system and global config unread.
    fn in_shadow(&self, shadow: &Shadow, args: &[&str]) -> Option<String> {
        let mut cmd = self.command();
        cmd.args(args)
            .env("GIT_DIR", shadow.dir.path())
            .env("GIT_WORK_TREE", &shadow.top)
            .env("GIT_INDEX_FILE", &shadow.index)
            .env("GIT_OBJECT_DIRECTORY", &shadow.objects)
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

    /// `git ARGS` in the workspace's repository, for commands that read
    /// refs and config files only.
    fn read(&self, args: &[&str]) -> Option<Vec<u8>> {
        let mut cmd = self.command();
        cmd.args(args);
        output(cmd)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        for (k, _) in std::env::vars_os() {
            if k.as_encoded_bytes().starts_with(b"GIT_")
                && !KEEP_ENV.iter().any(|keep| k == OsStr::new(keep))
            {
                cmd.env_remove(k);
            }
        }
        cmd.args(SWITCHES)
            .current_dir(self.workspace)
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }
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
    let pid = child.id();
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > GIT_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(1)),
            Err(_) => break None,
        }
    };
    crate::children::forget(pid);
    let out = reader.join().ok()?;
    status?.success().then_some(out)
}

#[cfg(test)]
mod tests;

//! The folders of a `PATH` that an agent could have written. A program
//! looked up by name in one of them may be one an agent planted; orch keeps
//! such folders from its own git and from the agent CLIs' own lookups
//! (the model's commands get them back: see `confine::shell`).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// What `PATH` becomes when every folder of it is left out: a folder that
/// is not there. An empty `PATH` would mean the working directory.
const NOWHERE: &str = "/nonexistent";

/// The most links followed on the way to one folder (the kernel's own
/// limit is 40).
const MOST_LINKS: usize = 40;

/// Trees an agent may write (the workspace, an attempt's writable
/// folders): as given and as they really are, and their own folders'
/// device and inode, to know one mounted elsewhere too (a bind mount of
/// the workspace).
#[derive(Debug, Clone, Default)]
pub(crate) struct Trees {
    paths: Vec<PathBuf>,
    roots: Vec<(u64, u64)>,
}

impl Trees {
    pub(crate) fn new(given: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut paths = Vec::new();
        for tree in given {
            if let Ok(real) = std::fs::canonicalize(&tree)
                && real != tree
            {
                paths.push(real);
            }
            paths.push(tree);
        }
        let roots = paths
            .iter()
            .filter_map(|t| std::fs::metadata(t).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        Self { paths, roots }
    }

    /// `path` without the folders a program must not be looked up in, and
    /// those folders. A CLI starts programs by name itself (Copilot CLI's
    /// `pgrep`, OpenCode's `rg`, Claude Code's `ps`, the `node` of its
    /// `#!/usr/bin/env node` line), in its own domain: a folder of its
    /// `PATH` that may lead into one of the trees (see
    /// [`Trees::may_lead_into`]), or a relative one (the working directory:
    /// the workspace), would let an agent plant the program the CLI runs
    /// next. Never empty (see [`NOWHERE`]).
    pub(crate) fn path_without(&self, path: &OsStr) -> (OsString, Vec<PathBuf>) {
        let (kept, left_out): (Vec<PathBuf>, Vec<PathBuf>) =
            std::env::split_paths(path).partition(|dir| !self.may_lead_into(dir));
        // (Folders split from a PATH always join again.)
        let kept = match std::env::join_paths(&kept) {
            Ok(kept) if !kept.is_empty() => kept,
            _ => NOWHERE.into(),
        };
        (kept, left_out)
    }

    /// The first program called `program` on `path` (or `program` itself
    /// when it names a path, relative to `cwd`) that does not lead into
    /// the trees, the file as well as its folder (a link
    /// `/usr/local/bin/claude -> <workspace>/...`).
    pub(crate) fn find(&self, program: &str, path: &OsStr, cwd: &Path) -> Option<PathBuf> {
        self.find_on(program, &self.path_without(path).0, cwd)
    }

    /// [`Trees::find`] on a `PATH` already without the folders that lead
    /// into the trees (from [`Trees::path_without`]).
    pub(crate) fn find_on(&self, program: &str, kept: &OsStr, cwd: &Path) -> Option<PathBuf> {
        which::which_in_all(program, Some(kept), cwd)
            .ok()?
            .find(|found| !self.may_lead_into(found))
    }

    /// Whether a lookup in the absolute folder `dir` could end in one of
    /// the trees, now or after a change there: its path is walked one name
    /// at a time from `/`, every link on the way followed (also one whose
    /// target does not exist yet), and each folder passed through, as
    /// written and as reached, is held against the trees. A link in a tree
    /// the agent may write can be changed to name anything, and a missing
    /// folder there can be made: so passing through a tree at all is
    /// enough; so is passing through a tree's own folder mounted
    /// elsewhere. A relative `dir`, a link that cannot be read, or a walk
    /// past [`MOST_LINKS`], counts as leading in. Not seen: a folder inside
    /// a tree mounted elsewhere on its own, and a program file hard-linked
    /// into a tree (the kernel lets a write through either name).
    pub(crate) fn may_lead_into(&self, dir: &Path) -> bool {
        let inside = |p: &Path| self.paths.iter().any(|t| p.starts_with(t));
        if !dir.is_absolute() || inside(dir) {
            return true;
        }
        let walked = walk_links(
            dir,
            |next, m| {
                if inside(next) {
                    return Err(());
                }
                match m {
                    Ok(m)
                        if !m.file_type().is_symlink()
                            && self.roots.contains(&(m.dev(), m.ino())) =>
                    {
                        Err(())
                    }
                    // A link, a folder, a file or nothing yet: a name
                    // below it is looked up in it.
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(_) => Err(()),
                }
            },
            |_| (),
        );
        walked.map_or(true, |at| inside(&at))
    }
}

/// Walk the absolute `path` one name at a time from `/`, as the kernel
/// looks it up: `step` sees each path reached and its own metadata (a
/// link's, not its target's) and may stop the walk with an error; a link
/// is followed by walking its target in its place (at most
/// [`MOST_LINKS`]; past that, or a link that cannot be read, `fail` says
/// why). The path reached last.
pub(crate) fn walk_links<E>(
    path: &Path,
    mut step: impl FnMut(&Path, Result<&std::fs::Metadata, &std::io::Error>) -> Result<(), E>,
    fail: impl Fn(&Path) -> E,
) -> Result<PathBuf, E> {
    // The names still to walk, first to last.
    let mut to_walk: Vec<OsString> = Vec::new();
    let push = |to_walk: &mut Vec<OsString>, p: &Path| {
        to_walk.extend(p.components().rev().map(|c| c.as_os_str().to_owned()));
    };
    push(&mut to_walk, path);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(name) = to_walk.pop() {
        match Path::new(&name).components().next() {
            Some(Component::RootDir) => at = PathBuf::from("/"),
            Some(Component::ParentDir) => {
                at.pop();
            }
            Some(Component::Normal(n)) => {
                let next = at.join(n);
                let m = std::fs::symlink_metadata(&next);
                step(&next, m.as_ref())?;
                if m.is_ok_and(|m| m.file_type().is_symlink()) {
                    links += 1;
                    let Ok(target) = std::fs::read_link(&next) else {
                        return Err(fail(&next));
                    };
                    if links > MOST_LINKS {
                        return Err(fail(&next));
                    }
                    push(&mut to_walk, &target);
                } else {
                    at = next;
                }
            }
            _ => {}
        }
    }
    Ok(at)
}

/// orch's own `PATH` without relative folders and those that may lead
/// into the folder orch runs in or its repository ([`here`]: the
/// workspace, an activated `.venv/bin`), where an agent could have put a
/// program of the name orch runs itself, unconfined (git; a CLI's
/// `--version` and the `node` it starts).
pub(crate) fn orchs_path() -> &'static OsStr {
    static PATH: std::sync::OnceLock<OsString> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        here().path_without(&path).0
    })
}

/// The folder orch runs in, and the top of the git repository it is in
/// (orch run from a subfolder of the workspace); not a repository whose
/// top is the home or above it (a home kept in git), which would leave
/// out every folder of the home. (Run in the home itself, orch passes
/// over every folder of `PATH` in it.)
pub(crate) fn here() -> &'static Trees {
    static HERE: std::sync::OnceLock<Trees> = std::sync::OnceLock::new();
    HERE.get_or_init(|| {
        let Ok(cwd) = std::env::current_dir() else {
            return Trees::default();
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let top = cwd
            .ancestors()
            .find(|a| a.join(".git").symlink_metadata().is_ok())
            .filter(|top| home.as_ref().is_none_or(|h| !h.starts_with(top)))
            .map(Path::to_path_buf);
        Trees::new([Some(cwd), top].into_iter().flatten())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's PATH leaves out relative folders and those in trees the
    /// agent may write (as written and as they really are, also where
    /// they do not exist yet); the rest stays, in order; with nothing
    /// left, a folder that is not there (never the working directory).
    #[test]
    fn the_clis_path_leaves_out_what_the_agent_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("bin")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        let left: Vec<PathBuf> = [
            PathBuf::from("rel"),
            PathBuf::from(""),
            ws.join("bin"),
            link.join("bin"),
            link.join("later/bin"),
            ws.join("x/../../up"),
        ]
        .into();
        let path = std::env::join_paths(
            [Path::new("/shells")]
                .into_iter()
                .chain(left.iter().map(PathBuf::as_path))
                .chain([Path::new("/usr/bin"), dir.path()]),
        )
        .unwrap();
        let trees = Trees::new([ws.clone()]);
        let (kept, out) = trees.path_without(&path);
        assert_eq!(
            kept,
            std::env::join_paths([Path::new("/shells"), Path::new("/usr/bin"), dir.path()])
                .unwrap()
        );
        assert_eq!(out, left);
        // A link from outside into the workspace whose target is not
        // there yet; a chain of links through the workspace that ends
        // outside it now (an attacker's review planted into both once the
        // CLI had started); a link loop; a folder that is fine.
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(ws.join("build"), outside.join("tools")).unwrap();
        std::os::unix::fs::symlink("/usr", ws.join("usr")).unwrap();
        std::os::unix::fs::symlink(ws.join("usr"), outside.join("chain")).unwrap();
        std::os::unix::fs::symlink(outside.join("loop"), outside.join("loop")).unwrap();
        for (dir, leads) in [
            (outside.join("tools/bin"), true),
            (outside.join("chain/bin"), true),
            (outside.join("loop/bin"), true),
            (PathBuf::from("relative/bin"), true),
            (outside.join("../outside/x/../bin"), false),
            (PathBuf::from("/usr/bin"), false),
        ] {
            assert_eq!(trees.may_lead_into(&dir), leads, "{}", dir.display());
        }
        let (kept, out) = trees.path_without(OsStr::new("/usr/bin:/bin"));
        assert_eq!((kept.to_str(), out.len()), (Some("/usr/bin:/bin"), 0));
        let (kept, _) = trees.path_without(ws.join("bin").as_os_str());
        assert_eq!(kept, NOWHERE);
    }

    /// A program is found past folders that lead into the trees, and past
    /// a file that is a link into them (the control: the next one).
    #[test]
    fn a_program_is_never_found_in_the_trees() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        for d in [&ws, &first, &second] {
            std::fs::create_dir_all(d).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        let program = ws.join("tool");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&program, first.join("tool")).unwrap();
        std::fs::copy(&program, second.join("tool")).unwrap();
        let path = std::env::join_paths([&ws, &first, &second]).unwrap();
        let trees = Trees::new([ws.clone()]);
        assert_eq!(
            trees.find("tool", &path, Path::new("/")),
            Some(second.join("tool"))
        );
        assert_eq!(
            Trees::default().find("tool", &path, Path::new("/")),
            Some(program)
        );
    }
}

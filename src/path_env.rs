//! The folders of a `PATH` that an agent could have written. A program
//! looked up by name in one of them may be one an agent planted; orch keeps
//! such folders from its own git and from the agent CLIs' own lookups
//! (the model's commands get them back: see `confine::shell`).

use std::path::{Path, PathBuf};

/// `path` without the folders a program must not be looked up in, and
/// those folders. A CLI starts programs by name itself (Copilot CLI's
/// `pgrep`, OpenCode's `rg`, Claude Code's `ps`), in its own domain: a
/// folder of its `PATH` the agent may write (in one of `trees`), or a
/// relative one (the working directory: the workspace), would let a
/// command plant the program the CLI runs next. See [`may_lead_into`] for
/// how a folder is judged.
pub(crate) fn without_writable(
    path: &std::ffi::OsStr,
    trees: &[PathBuf],
) -> (std::ffi::OsString, Vec<PathBuf>) {
    let (kept, left_out): (Vec<PathBuf>, Vec<PathBuf>) = std::env::split_paths(path)
        .partition(|dir| dir.is_absolute() && !may_lead_into(dir, trees));
    // (Folders split from a PATH always join again.)
    let kept = std::env::join_paths(&kept).unwrap_or_default();
    (kept, left_out)
}

/// orch's own `PATH` without relative folders and those that may lead
/// into the folder orch runs in or its repository (the workspace: an
/// activated `.venv/bin`),
/// where an agent could have put a program of the name orch runs itself,
/// unconfined (git; a CLI's `--version` and the `node` it starts).
pub(crate) fn outside_here() -> &'static std::ffi::OsStr {
    static PATH: std::sync::OnceLock<std::ffi::OsString> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        without_writable(&path, here()).0
    })
}

/// Whether `path` is in, or leads by a link into, the folder orch runs
/// in (see [`outside_here`]).
pub(crate) fn leads_here(path: &Path) -> bool {
    may_lead_into(path, here())
}

/// The folder orch runs in, and the top of the git repository it is in
/// (orch run from a subfolder of the workspace), as given and as they
/// are; not a repository whose top is the home or above it (a home kept
/// in git), which would leave out every folder of the home.
fn here() -> &'static [PathBuf] {
    static HERE: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    HERE.get_or_init(|| {
        let Ok(cwd) = std::env::current_dir() else {
            return Vec::new();
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let top = cwd
            .ancestors()
            .find(|a| a.join(".git").symlink_metadata().is_ok())
            .filter(|top| home.as_ref().is_none_or(|h| !h.starts_with(top)))
            .map(Path::to_path_buf);
        [Some(cwd), top]
            .into_iter()
            .flatten()
            .flat_map(|d| [std::fs::canonicalize(&d).unwrap_or_else(|_| d.clone()), d])
            .collect()
    })
}

/// The most links followed on the way to one folder (the kernel's own
/// limit is 40).
const MOST_LINKS: usize = 40;

/// Whether a lookup in the absolute folder `dir` could end in one of
/// `trees`, now or after a change there: its path is walked one name at a
/// time from `/`, every link on the way followed (also one whose target
/// does not exist yet), and each folder passed through, as written and as
/// reached, is held against `trees`. A link in a tree the agent may write
/// can be changed to name anything, and a missing folder there can be
/// made: so passing through a tree at all is enough; so is passing
/// through a tree's own folder mounted elsewhere (known by its device and
/// inode). A link that cannot be read, or a walk past [`MOST_LINKS`],
/// counts as leading in. Not seen: a folder inside a tree mounted
/// elsewhere on its own, and a program file hard-linked into a tree (the
/// kernel lets a write through either name).
pub(crate) fn may_lead_into(dir: &Path, trees: &[PathBuf]) -> bool {
    use std::os::unix::fs::MetadataExt;
    use std::path::Component;
    let inside = |p: &Path| trees.iter().any(|t| p.starts_with(t));
    if inside(dir) {
        return true;
    }
    // The trees as folders, to know one mounted elsewhere too (a bind
    // mount of the workspace).
    let roots: Vec<(u64, u64)> = trees
        .iter()
        .filter_map(|t| std::fs::metadata(t).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    // The names still to walk, first to last.
    let mut to_walk: Vec<std::ffi::OsString> = Vec::new();
    let push = |to_walk: &mut Vec<std::ffi::OsString>, p: &Path| {
        to_walk.extend(p.components().rev().map(|c| c.as_os_str().to_owned()));
    };
    push(&mut to_walk, dir);
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
                if inside(&next) {
                    return true;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(m) if m.file_type().is_symlink() => {
                        links += 1;
                        let Ok(target) = std::fs::read_link(&next) else {
                            return true;
                        };
                        if links > MOST_LINKS {
                            return true;
                        }
                        push(&mut to_walk, &target);
                    }
                    Ok(m) if roots.contains(&(m.dev(), m.ino())) => return true,
                    // A folder, a file or nothing yet: a name below it is
                    // looked up in it.
                    Ok(_) => at = next,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => at = next,
                    Err(_) => return true,
                }
            }
            _ => {}
        }
    }
    inside(&at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CLI's PATH leaves out relative folders and those in trees the
    /// agent may write (as written and as they really are, also where
    /// they do not exist yet); the rest stays, in order.
    #[test]
    fn the_clis_path_leaves_out_what_the_agent_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("bin")).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&ws, &link).unwrap();
        let path = std::env::join_paths([
            Path::new("/shells"),
            Path::new("rel"),
            Path::new(""),
            &ws.join("bin"),
            &link.join("bin"),
            &link.join("later/bin"),
            &ws.join("x/../../up"),
            Path::new("/usr/bin"),
            dir.path(),
        ])
        .unwrap();
        let (kept, out) = without_writable(&path, std::slice::from_ref(&ws));
        assert_eq!(
            kept,
            std::env::join_paths([Path::new("/shells"), Path::new("/usr/bin"), dir.path()])
                .unwrap()
        );
        assert_eq!(out.len(), 6, "{out:?}");
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
        let trees = [ws.clone(), std::fs::canonicalize(&ws).unwrap()];
        for (dir, leads) in [
            (outside.join("tools/bin"), true),
            (outside.join("chain/bin"), true),
            (outside.join("loop/bin"), true),
            (outside.join("../outside/x/../bin"), false),
            (PathBuf::from("/usr/bin"), false),
        ] {
            assert_eq!(may_lead_into(&dir, &trees), leads, "{}", dir.display());
        }
        let (kept, out) = without_writable(std::ffi::OsStr::new("/usr/bin:/bin"), &[ws]);
        assert_eq!((kept.to_str(), out.len()), (Some("/usr/bin:/bin"), 0));
    }
}

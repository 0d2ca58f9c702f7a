//! The folders of a `PATH` that an agent could have written. A program
//! looked up by name in one of them may be one an agent planted; orch keeps
//! such folders from its own git and from the agent CLIs' own lookups
//! (the model's commands get them back: see `confine::shell`).

use std::path::{Path, PathBuf};

/// `path` without the folders a program must not be looked up in, and
/// those folders. A CLI starts programs by name itself (Copilot CLI's
/// `pgrep`, OpenCode's `rg`, Claude Code's `ps`), in its own domain: a
/// folder of its `PATH` the agent may write (in one of `trees`, as the
/// path reads or as it really is), or a relative one (the working
/// directory: the workspace), would let a command plant the program the
/// CLI runs next. A folder that does not exist yet is judged by the
/// nearest folder above it that does.
pub(crate) fn without_writable(
    path: &std::ffi::OsStr,
    trees: &[PathBuf],
) -> (std::ffi::OsString, Vec<PathBuf>) {
    let (kept, left_out): (Vec<PathBuf>, Vec<PathBuf>) =
        std::env::split_paths(path).partition(|dir| {
            dir.is_absolute()
                && as_it_is(dir).is_some_and(|real| {
                    !trees
                        .iter()
                        .any(|t| dir.starts_with(t) || real.starts_with(t))
                })
        });
    // (Folders split from a PATH always join again.)
    let kept = std::env::join_paths(&kept).unwrap_or_default();
    (kept, left_out)
}

/// Where `path` really is: its nearest existing ancestor with links
/// resolved, and the rest as written. `None` when the rest climbs (`..`):
/// there is no telling where it ends up.
pub(crate) fn as_it_is(path: &Path) -> Option<PathBuf> {
    let (real, rest) = path.ancestors().find_map(|a| {
        let real = std::fs::canonicalize(a).ok()?;
        Some((real, path.strip_prefix(a).ok()?))
    })?;
    let climbs = rest
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)));
    (!climbs).then(|| real.join(rest))
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
        let (kept, out) = without_writable(std::ffi::OsStr::new("/usr/bin:/bin"), &[ws]);
        assert_eq!((kept.to_str(), out.len()), (Some("/usr/bin:/bin"), 0));
    }
}

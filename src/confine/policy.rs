//! What a permission level lets a confined process tree touch, as paths.
//!
//! - `read-only`: no writes anywhere but the attempt's own directory (its
//!   home, CLI config, temporary files) and the devices every process needs.
//! - `workspace-write`: the same, plus the workspace.
//! - `full-access`: not confined.
//!
//! Reads: everything but the real user's home directory, wherever it is
//! mounted, and the devices (but `/dev/null` and the like); inside the home
//! only the toolchain folders agents need
//! ([`HOME_TOOLCHAINS`]), the folders a user adds (`allow_read`), the PATH
//! folders and the agent's own program stay readable. The workspace and the
//! attempt's directory are readable wherever they are.
//!
//! This module is pure: it decides paths. [`super::landlock`] turns a
//! [`Policy`] into kernel rules.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model::Permission;

/// Folders (and files) under the real home that stay readable: toolchains
/// and package caches, never credentials (`~/.cargo/credentials.toml`,
/// `~/.npmrc`, `~/.local/share`, `~/.config` are not here).
pub(crate) const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".cargo/env",
    ".cargo/config.toml",
    ".cargo/config",
    ".rustup",
    ".npm",
    ".nvm",
    ".volta",
    ".fnm",
    ".bun/bin",
    ".bun/install/cache",
    ".deno",
    ".local/bin",
    ".local/lib",
    ".pyenv",
    ".rbenv",
    ".asdf",
    ".sdkman",
    ".ghcup",
    "go/bin",
    "go/pkg",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
    ".config/git/attributes",
];

/// Trees no confined process may read, besides the home: the devices (a
/// raw disk such as `/dev/vda` holds every file, the home's included; a
/// terminal holds the user's keystrokes). The few a process needs are
/// [`DEVICES`]. (`/proc` stays readable whole: a rule on part of it would
/// miss the processes started later. What needs a capability there, such
/// as `/proc/kcore`, is out of reach anyway: confined processes have none.)
pub(crate) const UNREADABLE: &[&str] = &["/dev"];

/// Device files a confined process may read and write (never create). No
/// terminal: not `/dev/tty` nor `/dev/pts/*`, which would let an agent read
/// the user's keystrokes or type into the terminal orch runs in (none of the
/// five CLIs needs one in headless mode: Gemini's shell falls back to pipes).
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Where one attempt runs, for its policy.
#[derive(Debug, Clone)]
pub(crate) struct Places {
    /// The workspace (the agent's working directory).
    pub(crate) workspace: PathBuf,
    /// The attempt's own directory: readable. The files orch writes there
    /// for the CLI (its MCP configuration, policy, prompt) are not
    /// writable...
    pub(crate) own_dir: PathBuf,
    /// ...only the CLI's own folders in it are: its home, config directory
    /// and temporary files.
    pub(crate) own_writable: Vec<PathBuf>,
    /// The real user's home: not readable.
    pub(crate) home: Option<PathBuf>,
    /// Readable exceptions inside the home (toolchains, `allow_read`, PATH
    /// folders, the program's folder), absolute.
    pub(crate) home_readable: Vec<PathBuf>,
    /// Files the process tree may write besides its own directory (the run
    /// database orch's MCP server records in).
    pub(crate) also_writable: Vec<PathBuf>,
    /// What to hide under `read-only` besides the home: folders in and
    /// above the workspace the CLI would load code from (OpenCode's
    /// `.opencode` plugins, which it loads whatever its flags say), links
    /// included: [`Policy::hiding_holds`] refuses them.
    pub(crate) also_hidden: Vec<PathBuf>,
    /// orch's state directory (every run's logs and database, with what
    /// agents printed): hidden at every level. (Under `workspace-write`
    /// one inside the workspace cannot be.)
    pub(crate) state_dir: Option<PathBuf>,
}

/// What one confined process tree may do with the file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Policy {
    pub(crate) permission: Permission,
    /// Trees it may read and change.
    pub(crate) writable: Vec<PathBuf>,
    /// Device files it may read and write.
    pub(crate) devices: Vec<PathBuf>,
    /// Trees it may not read (the home, at every path it is mounted at).
    pub(crate) hidden: Vec<PathBuf>,
    /// Readable exceptions inside the hidden trees.
    pub(crate) readable: Vec<PathBuf>,
    /// The attempt's own directory: new with every attempt (the other
    /// exceptions are the same for every agent of a run).
    #[serde(skip)]
    pub(crate) own_dir: PathBuf,
    /// The hidden folders the CLI would load code from
    /// ([`Places::also_hidden`]), checked as the process starts
    /// ([`Policy::hiding_holds`]).
    #[serde(skip)]
    pub(crate) code_hidden: Vec<PathBuf>,
}

impl Policy {
    /// The policy for a permission level, or `None` when the level is not
    /// confined (`full-access`). `aliases` are the other paths the home is
    /// mounted at (see [`home_aliases`]).
    pub(crate) fn for_permission(
        permission: Permission,
        places: &Places,
        aliases: &[PathBuf],
    ) -> Option<Policy> {
        let mut writable = places.own_writable.clone();
        match permission {
            Permission::FullAccess => return None,
            Permission::ReadOnly => {}
            Permission::WorkspaceWrite => writable.push(places.workspace.clone()),
        }
        writable.extend(places.also_writable.iter().cloned());
        let mut hidden: Vec<PathBuf> = Vec::new();
        if let Some(home) = places.home.as_ref().filter(|h| h.parent().is_some()) {
            hidden.push(home.clone());
            hidden.extend(aliases.iter().filter(|a| *a != home).cloned());
        }
        hidden.extend(UNREADABLE.iter().map(PathBuf::from));
        // The other attempts' directories (their CLIs' sessions and
        // tokens), wherever the cache folder is: the own one is an
        // exception below.
        if let Some(attempts) = places.own_dir.parent().filter(|p| p.parent().is_some()) {
            hidden.push(attempts.to_path_buf());
        }
        hidden.extend(places.state_dir.iter().cloned());
        if permission == Permission::ReadOnly {
            // (Under workspace-write the workspace is writable, so readable
            // whole: nothing in it can be hidden.)
            hidden.extend(places.also_hidden.iter().cloned());
        }
        // A tree inside a writable one is readable with it whatever the
        // list says (Landlock only adds): `explain` must not call it
        // hidden (the state directory inside a writable workspace).
        hidden.retain(|h| !writable.iter().any(|w| h.starts_with(w)));
        // The workspace and the own directory are readable wherever they are;
        // re-allowing a tree that is not hidden costs nothing.
        let mut readable = vec![places.workspace.clone(), places.own_dir.clone()];
        readable.extend(places.home_readable.iter().cloned());
        readable.retain(|r| hidden.iter().any(|h| r.starts_with(h)));
        dedupe(&mut readable);
        dedupe(&mut writable);
        Some(Policy {
            permission,
            writable,
            devices: DEVICES.iter().map(PathBuf::from).collect(),
            hidden,
            readable,
            own_dir: places.own_dir.clone(),
            code_hidden: match permission {
                Permission::ReadOnly => places.also_hidden.clone(),
                _ => Vec::new(),
            },
        })
    }

    /// Whether hiding [`Policy::code_hidden`] keeps what is in them from
    /// the process: `Err` says why not, and the process must not start.
    /// Landlock hides the files and folders beneath a hidden folder, but
    /// not a lookup through it: a link at a hidden path, or an entry of a
    /// hidden folder that is a link (`.opencode/plugin`,
    /// `.opencode/opencode.json`), leads the CLI, which follows it, to a
    /// tree that is readable (the worker's `pl/`), and what it loads from
    /// there runs in the process. Such a path is refused, whatever the link
    /// names (a link that names nothing yet may name something by the time
    /// the CLI reads it). So is an entry that is a file with other names (a
    /// hard link): Landlock's rule on a readable file is on the file itself,
    /// whatever name it is opened by. Only the entries of a hidden folder
    /// are looked at: one beneath them is reached by listing a hidden
    /// folder, which is refused.
    pub(crate) fn hiding_holds(&self) -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        let why = |p: &Path, e: std::io::Error| format!("cannot check `{}`: {e}", p.display());
        let linked = |p: &Path| {
            format!(
                "`{}` is a link: it leads to what orch cannot hide from a read-only agent (the CLI loads code from there); remove the link or make it a plain folder",
                p.display()
            )
        };
        for path in &self.code_hidden {
            let meta = match std::fs::symlink_metadata(path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(why(path, e)),
            };
            if meta.file_type().is_symlink() {
                return Err(linked(path));
            }
            if !meta.is_dir() {
                // Hidden as it is; nothing is looked up through it.
                continue;
            }
            for entry in std::fs::read_dir(path).map_err(|e| why(path, e))? {
                let entry = entry.map_err(|e| why(path, e))?;
                let meta = entry.metadata().map_err(|e| why(&entry.path(), e))?;
                if meta.file_type().is_symlink() {
                    return Err(linked(&entry.path()));
                }
                if !meta.is_dir() && meta.nlink() > 1 {
                    return Err(format!(
                        "`{}` has other names (a hard link): under another it may be readable, and the CLI loads code from what it reads there; make it a file of its own",
                        entry.path().display()
                    ));
                }
            }
        }
        Ok(())
    }
}

impl Policy {
    /// The policy of a program orch starts for the attempt beside its
    /// agent (a pipeline's MCP server): the same trees, but `own` (a
    /// folder of its own, out of the agent's reach) in place of the
    /// attempt's own directory, which it may neither read nor write. What
    /// the agent may change there (its home, its temporary files) is
    /// nothing the program should load code from.
    pub(crate) fn beside(&self, own: &Path) -> Policy {
        let mut p = self.clone();
        p.writable.retain(|w| !w.starts_with(&self.own_dir));
        p.readable.retain(|r| !r.starts_with(&self.own_dir));
        p.writable.push(own.to_path_buf());
        p.own_dir = own.to_path_buf();
        p
    }
}

fn dedupe(v: &mut Vec<PathBuf>) {
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
}

/// The readable exceptions inside `home`: the toolchain folders, the
/// user's `allow_read` (`~/x` or absolute), PATH folders under the home
/// (never the home itself) and the agent's program (the file alone, or the
/// whole `node_modules` tree it is in, since an npm package needs that).
/// `path_dirs` and `program` are real paths (links resolved), as is `home`.
///
/// The program's folder is not made readable: a pipeline (which the
/// repository controls) names the program, and one sitting in `~/.ssh` or
/// in the home itself would otherwise open that folder.
pub(crate) fn home_readable(
    home: &Path,
    allow_read: &[String],
    path_dirs: &[PathBuf],
    program: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = HOME_TOOLCHAINS.iter().map(|t| home.join(t)).collect();
    for a in allow_read {
        if let Some(rest) = a.strip_prefix("~/") {
            out.push(home.join(rest));
        } else if a == "~" {
            out.push(home.to_path_buf());
        } else {
            out.push(PathBuf::from(a));
        }
    }
    out.extend(
        path_dirs
            .iter()
            .filter(|d| d.starts_with(home) && d.as_path() != home)
            .cloned(),
    );
    if let Some(p) = program.filter(|p| p.starts_with(home) && *p != home) {
        out.push(p.to_path_buf());
        // An npm package needs its whole node_modules tree.
        if let Some(modules) = p
            .ancestors()
            .take_while(|a| *a != home)
            .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        {
            out.push(modules.to_path_buf());
        }
    }
    out
}

/// One entry of a directory as the walk sees it: its path (its folder's
/// path and its name), whether it is a symbolic link or a folder, and the
/// handle it was opened by (a descriptor, for the kernel rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry<N> {
    pub(crate) path: PathBuf,
    pub(crate) link: bool,
    pub(crate) dir: bool,
    pub(crate) node: N,
}

/// The trees to make readable so that everything under `root` except the
/// `hidden` paths (real paths) below it is: walk down from `root` along
/// each hidden path and allow every entry beside the way, as the node it
/// was listed with. No symbolic link is followed or allowed: a link is
/// only a way to a tree, which is allowed (or not) where it really is, so
/// a link an agent planted, or swapped in while the walk runs, can lead to
/// nothing. Landlock cannot carve a subtree out of an allowed tree, hence
/// the walk. (Whether `root` itself may be read is the caller's business:
/// a readable folder inside the hidden home is walked the same way, to
/// keep what is hidden inside it hidden.)
pub(crate) fn readable_roots<N>(
    root: (PathBuf, N),
    hidden: &[PathBuf],
    list: &dyn Fn(&Path, &N) -> Vec<Entry<N>>,
) -> Vec<(PathBuf, N)> {
    // Only what is hidden below `root` matters here.
    let below: Vec<&PathBuf> = hidden
        .iter()
        .filter(|h| h.as_path() != root.0 && h.starts_with(&root.0))
        .collect();
    if below.is_empty() {
        return vec![root];
    }
    let on_the_way = |p: &Path| below.iter().any(|h| h.as_path() != p && h.starts_with(p));
    let mut out = Vec::new();
    let mut walk = vec![root];
    while let Some((dir, node)) = walk.pop() {
        for e in list(&dir, &node) {
            if e.link || below.iter().any(|h| e.path.starts_with(h)) {
                continue;
            }
            if on_the_way(&e.path) {
                if e.dir {
                    walk.push((e.path, e.node));
                }
                continue;
            }
            out.push((e.path, e.node));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A mount, as `/proc/self/mountinfo` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    /// `major:minor` of the file system.
    pub(crate) device: String,
    /// The mounted directory within its file system.
    pub(crate) root: PathBuf,
    /// Where it is mounted.
    pub(crate) mount_point: PathBuf,
    /// The file system's type (`ext4`, `cgroup2`, ...).
    pub(crate) fstype: String,
}

/// Parse `/proc/self/mountinfo`; lines it cannot read are skipped.
///
/// Read as bytes, not text: the kernel writes paths as they are (only
/// space, tab, newline and backslash escaped), and a path need not be
/// UTF-8. A lossy reading would turn a home mounted at such a path into
/// another path, which would then not be hidden.
pub(crate) fn parse_mountinfo(text: impl AsRef<[u8]>) -> Vec<Mount> {
    text.as_ref()
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut f = line.split(|&b| b == b' ');
            let (_id, _parent) = (f.next()?, f.next()?);
            let device = String::from_utf8_lossy(f.next()?).into_owned();
            let root = unescape(f.next()?);
            let mount_point = unescape(f.next()?);
            // Optional fields, then `-`, then the type.
            let fstype = f
                .skip_while(|field| *field != b"-")
                .nth(1)
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .unwrap_or_default();
            Some(Mount {
                device,
                root,
                mount_point,
                fstype,
            })
        })
        .collect()
}

/// Where the whole of a file system of type `fstype` is mounted (its root
/// at a mount point), from mountinfo `text`.
pub(crate) fn parse_mountinfo_fs(text: impl AsRef<[u8]>, fstype: &str) -> Option<PathBuf> {
    parse_mountinfo(text)
        .into_iter()
        .find(|m| m.fstype == fstype && m.root == Path::new("/"))
        .map(|m| m.mount_point)
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`; the
/// path, byte for byte.
fn unescape(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Every other path `home` (resolved) is reachable at through the mounts:
/// a bind mount of the home or of a directory above it shows it again
/// elsewhere, and Landlock judges a path by the way it was reached.
pub(crate) fn home_aliases(home: &Path, mounts: &[Mount]) -> Vec<PathBuf> {
    // The mount the home is seen through: the longest mount point above it
    // (the last one listed wins a tie: it is mounted over the others).
    let Some(host) = mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| home.starts_with(&m.mount_point))
        .max_by_key(|(i, m)| (m.mount_point.components().count(), *i))
        .map(|(_, m)| m)
    else {
        return Vec::new();
    };
    let Ok(rest) = home.strip_prefix(&host.mount_point) else {
        return Vec::new();
    };
    let in_fs = host.root.join(rest);
    let mut out = Vec::new();
    for m in mounts.iter().filter(|m| m.device == host.device) {
        if let Ok(below) = in_fs.strip_prefix(&m.root) {
            let alias = m.mount_point.join(below);
            if alias != home && !out.contains(&alias) {
                out.push(alias);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Places {
        Places {
            workspace: "/work/proj".into(),
            own_dir: "/home/u/.cache/orch/attempts/a1".into(),
            own_writable: vec![
                "/home/u/.cache/orch/attempts/a1/home".into(),
                "/home/u/.cache/orch/attempts/a1/tmp".into(),
            ],
            home: Some("/home/u".into()),
            home_readable: vec!["/home/u/.cargo/bin".into(), "/opt/x".into()],
            also_writable: vec!["/work/proj/.orch/state.db".into()],
            also_hidden: vec!["/work/proj/.opencode".into()],
            state_dir: Some("/work/proj/.orch".into()),
        }
    }

    /// A worker's `.opencode` that leads out of the hidden tree (a link to
    /// a folder of the workspace, an entry that is a link, a file with a
    /// second name outside): the read-only process does not start, and says
    /// which path. A plain folder (the control), or none, is hidden as it
    /// is; under `workspace-write` nothing is hidden, so nothing is checked.
    #[test]
    fn a_hidden_folder_that_leads_elsewhere_refuses_the_start() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap();
        let hidden = ws.join(".opencode");
        let policy = |level| {
            let mut p = places();
            p.workspace = ws.clone();
            p.also_hidden = vec![hidden.clone()];
            Policy::for_permission(level, &p, &[]).unwrap()
        };
        let read_only = policy(Permission::ReadOnly);
        assert_eq!(read_only.hiding_holds(), Ok(()), "none there");
        std::fs::create_dir_all(ws.join("pl/plugin")).unwrap();
        std::fs::write(ws.join("pl/plugin/forge.js"), "x").unwrap();
        std::fs::write(ws.join("cfg.json"), "{}").unwrap();
        let plain = || {
            let _ = std::fs::remove_file(&hidden);
            let _ = std::fs::remove_dir_all(&hidden);
            std::fs::create_dir_all(hidden.join("plugin")).unwrap();
            std::fs::write(hidden.join("plugin/own.js"), "x").unwrap();
            std::fs::write(hidden.join("opencode.json"), "{}").unwrap();
        };
        plain();
        assert_eq!(read_only.hiding_holds(), Ok(()), "a plain folder");
        let cases: [(&str, &dyn Fn(), PathBuf); 5] = [
            (
                "the folder a link",
                &|| {
                    std::fs::remove_dir_all(&hidden).unwrap();
                    std::os::unix::fs::symlink("pl", &hidden).unwrap();
                },
                hidden.clone(),
            ),
            (
                "a link naming nothing yet",
                &|| {
                    std::fs::remove_dir_all(&hidden).unwrap();
                    std::os::unix::fs::symlink("nothing", &hidden).unwrap();
                },
                hidden.clone(),
            ),
            (
                "an entry a link",
                &|| {
                    std::fs::remove_dir_all(hidden.join("plugin")).unwrap();
                    std::os::unix::fs::symlink("../pl/plugin", hidden.join("plugin")).unwrap();
                },
                hidden.join("plugin"),
            ),
            (
                "the config a link",
                &|| {
                    std::fs::remove_file(hidden.join("opencode.json")).unwrap();
                    std::os::unix::fs::symlink("../cfg.json", hidden.join("opencode.json"))
                        .unwrap();
                },
                hidden.join("opencode.json"),
            ),
            (
                "the config a hard link",
                &|| {
                    std::fs::remove_file(hidden.join("opencode.json")).unwrap();
                    std::fs::hard_link(ws.join("cfg.json"), hidden.join("opencode.json")).unwrap();
                },
                hidden.join("opencode.json"),
            ),
        ];
        for (what, plant, named) in cases {
            plain();
            plant();
            let refused = read_only.hiding_holds().expect_err(what);
            assert!(
                refused.contains(&format!("`{}`", named.display())),
                "{what}: {refused}"
            );
            assert_eq!(
                policy(Permission::WorkspaceWrite).hiding_holds(),
                Ok(()),
                "{what}"
            );
        }
    }

    #[test]
    fn a_program_beside_the_agent_has_its_own_folder_not_the_agents() {
        let p = places();
        let agent = Policy::for_permission(Permission::WorkspaceWrite, &p, &[]).unwrap();
        let own = PathBuf::from("/home/u/.cache/orch/attempts/a1.servers/docs");
        let server = agent.beside(&own);
        assert_eq!(
            server.writable,
            vec![
                PathBuf::from("/work/proj"),
                "/work/proj/.orch/state.db".into(),
                own.clone()
            ]
        );
        assert!(!server.readable.iter().any(|r| r.starts_with(&p.own_dir)));
        assert_eq!(server.own_dir, own);
        assert_eq!(server.hidden, agent.hidden);
        // The attempts' folder is hidden from the agent: so is the server's.
        assert!(agent.hidden.iter().any(|h| own.starts_with(h)));
        assert!(!agent.readable.iter().any(|r| own.starts_with(r)));
    }

    #[test]
    fn paths_per_permission() {
        let p = places();
        assert_eq!(
            Policy::for_permission(Permission::FullAccess, &p, &[]),
            None
        );

        let ro = Policy::for_permission(Permission::ReadOnly, &p, &[]).unwrap();
        assert_eq!(
            ro.writable,
            vec![
                PathBuf::from("/home/u/.cache/orch/attempts/a1/home"),
                "/home/u/.cache/orch/attempts/a1/tmp".into(),
                "/work/proj/.orch/state.db".into()
            ]
        );
        // The own directory is readable, but only the CLI's folders in it
        // are writable (not orch's files for it).
        assert!(ro.readable.contains(&p.own_dir));
        assert!(!ro.writable.contains(&p.own_dir));
        assert!(!ro.writable.contains(&p.workspace));
        assert_eq!(
            ro.hidden,
            vec![
                PathBuf::from("/home/u"),
                "/dev".into(),
                "/home/u/.cache/orch/attempts".into(),
                "/work/proj/.orch".into(),
                "/work/proj/.opencode".into()
            ]
        );
        // Other attempts' directories are hidden wherever they are.
        let mut elsewhere = places();
        elsewhere.own_dir = "/var/cache/orch/attempts/a1".into();
        let ww = Policy::for_permission(Permission::WorkspaceWrite, &elsewhere, &[]).unwrap();
        assert!(ww.hidden.contains(&"/var/cache/orch/attempts".into()));
        assert!(ww.readable.contains(&"/var/cache/orch/attempts/a1".into()));
        // Only exceptions inside the home are listed (the own directory is
        // one).
        assert_eq!(
            ro.readable,
            vec![
                PathBuf::from("/home/u/.cache/orch/attempts/a1"),
                "/home/u/.cargo/bin".into()
            ]
        );
        assert!(ro.devices.contains(&"/dev/null".into()));

        let ww = Policy::for_permission(Permission::WorkspaceWrite, &p, &[]).unwrap();
        assert!(ww.writable.contains(&p.workspace));
        assert!(
            ww.writable
                .contains(&"/home/u/.cache/orch/attempts/a1/tmp".into())
        );
        assert!(
            !ww.hidden.contains(&"/work/proj/.opencode".into()),
            "a writable workspace is readable whole"
        );
        // So is the state directory inside it: not listed as hidden.
        assert!(
            !ww.hidden.contains(&"/work/proj/.orch".into()),
            "{:?}",
            ww.hidden
        );
        assert!(ww.hidden.contains(&"/home/u".into()));
        let mut apart = places();
        apart.state_dir = Some("/srv/orch-state".into());
        let ww = Policy::for_permission(Permission::WorkspaceWrite, &apart, &[]).unwrap();
        assert!(ww.hidden.contains(&"/srv/orch-state".into()));
    }

    #[test]
    fn a_workspace_in_the_home_stays_readable_and_a_root_home_hides_nothing() {
        let mut p = places();
        p.workspace = "/home/u/src/proj".into();
        p.also_hidden.clear();
        p.state_dir = None;
        let ro = Policy::for_permission(Permission::ReadOnly, &p, &[]).unwrap();
        assert!(ro.readable.contains(&"/home/u/src/proj".into()));
        p.home = Some("/".into());
        let ro = Policy::for_permission(Permission::ReadOnly, &p, &[]).unwrap();
        assert_eq!(
            ro.hidden.len(),
            UNREADABLE.len() + 1,
            "HOME=/ cannot be hidden whole (only other attempts are)"
        );
        assert!(!ro.hidden.contains(&"/".into()));
        p.home = None;
        assert_eq!(
            Policy::for_permission(Permission::ReadOnly, &p, &[])
                .unwrap()
                .hidden
                .len(),
            UNREADABLE.len() + 1
        );
    }

    #[test]
    fn home_exceptions() {
        let home = Path::new("/home/u");
        let r = home_readable(
            home,
            &["~/.config/gh".into(), "/srv/data".into()],
            &["/home/u/bin".into(), "/usr/bin".into()],
            Some(Path::new(
                "/home/u/.npm-global/lib/node_modules/@x/cli/bin/x.js",
            )),
        );
        assert!(r.contains(&"/home/u/.cargo/bin".into()));
        assert!(r.contains(&"/home/u/.config/gh".into()));
        assert!(r.contains(&"/srv/data".into()));
        assert!(r.contains(&"/home/u/bin".into()));
        assert!(!r.contains(&"/usr/bin".into()));
        assert!(r.contains(&"/home/u/.npm-global/lib/node_modules".into()));
        // A PATH folder that is the home, or a program sitting in it or in a
        // secret folder, opens nothing but the program.
        let r = home_readable(
            home,
            &[],
            &["/home/u".into()],
            Some(Path::new("/home/u/.ssh/tool")),
        );
        assert!(!r.contains(&home.to_path_buf()));
        assert!(!r.contains(&home.join(".ssh")));
        assert!(r.contains(&home.join(".ssh/tool")));
        let r = home_readable(home, &[], &[], Some(Path::new("/home/u/tool")));
        assert!(!r.contains(&home.to_path_buf()));
        assert!(r.contains(&home.join("tool")));
        // Never a credential file.
        for secret in [
            ".ssh",
            ".aws",
            ".npmrc",
            ".cargo/credentials.toml",
            ".config",
        ] {
            assert!(!r.contains(&home.join(secret)), "{secret}");
        }
    }

    /// A fake file system: each directory's entries as (name, resolved);
    /// an entry whose resolved path is not its own is a link, one listed as
    /// a directory of its own is a folder.
    fn fs(dirs: &[(&str, &[(&str, &str)])]) -> impl Fn(&Path, &()) -> Vec<Entry<()>> {
        let listed: Vec<PathBuf> = dirs.iter().map(|(d, _)| PathBuf::from(d)).collect();
        let dirs: Vec<(PathBuf, Vec<Entry<()>>)> = dirs
            .iter()
            .map(|(d, es)| {
                (
                    PathBuf::from(d),
                    es.iter()
                        .map(|(n, r)| {
                            let path = Path::new(d).join(n);
                            Entry {
                                link: path != Path::new(r),
                                dir: listed.contains(&path),
                                path,
                                node: (),
                            }
                        })
                        .collect(),
                )
            })
            .collect();
        move |p: &Path, _: &()| {
            dirs.iter()
                .find(|(d, _)| d == p)
                .map(|(_, e)| e.clone())
                .unwrap_or_default()
        }
    }

    fn roots(
        root: &str,
        hidden: &[&str],
        list: &dyn Fn(&Path, &()) -> Vec<Entry<()>>,
    ) -> Vec<PathBuf> {
        let hidden: Vec<PathBuf> = hidden.iter().map(PathBuf::from).collect();
        readable_roots((PathBuf::from(root), ()), &hidden, list)
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    #[test]
    fn everything_but_the_home_is_readable() {
        let list = fs(&[
            (
                "/",
                &[
                    ("usr", "/usr"),
                    ("bin", "/usr/bin"),
                    ("home", "/home"),
                    ("tmp", "/tmp"),
                    ("sneaky", "/home/u/.ssh"),
                ],
            ),
            ("/home", &[("u", "/home/u"), ("v", "/home/v")]),
        ]);
        let got = roots("/", &["/home/u"], &list);
        // `bin` and `sneaky` are links: allowed (or not) where they lead.
        let want: Vec<PathBuf> = ["/home/v", "/tmp", "/usr"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_symbolic_link_onto_the_way_is_walked_by_its_real_path() {
        // Fedora Silverblue: /home -> var/home.
        let list = fs(&[
            (
                "/",
                &[("home", "/var/home"), ("var", "/var"), ("etc", "/etc")],
            ),
            ("/var", &[("home", "/var/home"), ("log", "/var/log")]),
            ("/var/home", &[("u", "/var/home/u"), ("v", "/var/home/v")]),
        ]);
        let got = roots("/", &["/var/home/u"], &list);
        let want: Vec<PathBuf> = ["/etc", "/var/home/v", "/var/log"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want, "/home itself would open /var/home whole");
        assert_eq!(roots("/", &[], &list), vec![PathBuf::from("/")]);
        // A readable folder inside the hidden tree keeps what is hidden
        // inside it hidden.
        let list = fs(&[(
            "/home/u/src",
            &[("p", "/home/u/src/p"), ("q", "/home/u/src/q")],
        )]);
        let hidden = ["/home/u", "/home/u/src/q"];
        assert_eq!(
            roots("/home/u/src", &hidden, &list),
            vec![PathBuf::from("/home/u/src/p")]
        );
        assert_eq!(
            roots("/home/u/src/p", &hidden, &list),
            vec![PathBuf::from("/home/u/src/p")]
        );
    }

    #[test]
    fn the_home_is_found_under_every_mount_of_it() {
        let mounts = parse_mountinfo(
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
             30 27 254:0 /home /mnt/old\\040homes rw - ext4 /dev/vda rw\n\
             31 27 254:0 / /srv/rootfs rw - ext4 /dev/vda rw\n\
             32 27 0:25 / /tmp rw - tmpfs tmpfs rw\n\
             33 27 254:0 /etc /srv/etc rw - ext4 /dev/vda rw\n",
        );
        assert_eq!(mounts[1].mount_point, PathBuf::from("/mnt/old homes"));
        assert_eq!(mounts[3].fstype, "tmpfs");
        assert_eq!(
            parse_mountinfo_fs(
                "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:5 - cgroup2 cgroup2 rw\n",
                "cgroup2"
            ),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let aliases = home_aliases(Path::new("/home/u"), &mounts);
        assert_eq!(
            aliases,
            vec![
                PathBuf::from("/mnt/old homes/u"),
                PathBuf::from("/srv/rootfs/home/u")
            ]
        );
        // A home on its own file system, bind-mounted once more.
        let mounts = parse_mountinfo(
            "27 1 254:0 / / rw - ext4 /dev/vda rw\n\
             40 27 8:1 / /home rw - ext4 /dev/sdb rw\n\
             41 27 8:1 /u /mnt/me rw - ext4 /dev/sdb rw\n",
        );
        assert_eq!(
            home_aliases(Path::new("/home/u/"), &mounts),
            vec![PathBuf::from("/mnt/me")]
        );
    }

    /// mountinfo holds paths as the kernel has them, bytes that need not be
    /// UTF-8: raw, or escaped as `\ooo` (space, tab, newline, backslash;
    /// any byte is read back the same way). A home mounted again at such a
    /// path, or living at one, is still found.
    #[test]
    fn mount_points_that_are_not_utf8_are_read_as_bytes() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let path = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
        let mounts = parse_mountinfo(
            b"27 1 254:0 / / rw - ext4 /dev/vda rw\n\
              30 27 254:0 /home /mnt/h\xe9me rw - ext4 /dev/vda rw\n\
              31 27 254:0 / /srv/\\377old\\040roots rw - ext4 /dev/vda rw\n",
        );
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[1].mount_point, path(b"/mnt/h\xe9me"));
        assert_eq!(mounts[2].mount_point, path(b"/srv/\xffold roots"));
        assert_eq!(
            home_aliases(Path::new("/home/u"), &mounts),
            vec![path(b"/mnt/h\xe9me/u"), path(b"/srv/\xffold roots/home/u")]
        );
        // A home whose own path is not UTF-8, on its own file system,
        // bind-mounted from a directory whose name is not either.
        let mounts = parse_mountinfo(
            b"27 1 254:0 / / rw - ext4 /dev/vda rw\n\
              40 27 8:1 / /home rw - ext4 /dev/sdb rw\n\
              41 27 8:1 /\xe9l\xe8ve /mnt/\\351 rw - ext4 /dev/sdb rw\n",
        );
        assert_eq!(mounts[2].root, path(b"/\xe9l\xe8ve"));
        assert_eq!(
            home_aliases(&path(b"/home/\xe9l\xe8ve"), &mounts),
            vec![path(b"/mnt/\xe9")]
        );
    }
}

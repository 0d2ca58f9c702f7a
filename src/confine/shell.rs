//! The model's commands in a Landlock domain of their own, below their
//! CLI's.
//!
//! Inside one Landlock domain a process may reach into another as a
//! debugger would: read its memory (`/proc/<pid>/mem`) and open its
//! descriptors (`/proc/<pid>/fd/<n>`). The model's commands ran in their
//! CLI's domain, so a command could read the CLI's memory, write into a
//! pipe the CLI reads (Node's internal signal pipe) and have the CLI print
//! lines of the command's choosing on the stream orch records as the
//! CLI's. From a domain nested below the CLI's it cannot: Landlock lets a
//! process trace, read or open `/proc` files of only its own domain and
//! those below it.
//!
//! The CLIs start the model's commands themselves, through a shell found by
//! `SHELL`, a variable of their own, or `bash` on `PATH`. A confined CLI is
//! given orch's own program under the names of [`NAMES`], in a folder of
//! its attempt's directory that it may read but not change, first on its
//! `PATH` and in those variables. Started under one of those names, orch
//! enters a new domain and executes the real shell, the next program of
//! that name on `PATH` that is not orch. The new domain reads what the
//! CLI's does, and writes only the folders [`WRITES`] names: the
//! workspace (when the phase may write it), the home, the temporary
//! folder, the git directory; not the CLI's own settings and sessions,
//! which the CLI reads again while it runs and runs programs from (Claude
//! Code's `apiKeyHelper`; OpenCode's snapshot repository and its git
//! config). The `XDG_*_HOME` variables that name such folders are left
//! out of the command's environment, so its programs use the home.
//!
//! Every start enters a domain: a shell cannot tell whether it runs in
//! the CLI's domain or in one below it, and a mark in the environment
//! would not do (a CLI may copy a shell's environment into the next
//! command's: Copilot CLI does). The kernel stacks at most 16 domains;
//! past that a command does not run. No signal scope is set: a command
//! may signal its CLI as before (the sandbox's seccomp filter refuses
//! `SIGUSR1`, which opens a Node CLI's inspector, everywhere).

use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::{
    ffi::OsString,
    os::unix::fs::{MetadataExt, PermissionsExt},
    os::unix::process::CommandExt,
    process::ExitCode,
};

#[cfg(target_os = "linux")]
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus,
};

/// The shells a confined CLI finds in its folder.
pub(crate) const SHELLS: &[&str] = &["bash", "sh"];

/// Every name orch's program takes in the folder: the shells, and `git`,
/// which a CLI starts itself (Copilot CLI after each tool call, OpenCode's
/// snapshots, Gemini CLI's search) and which runs what its configuration
/// names (filters, a promisor remote's `uploadpack`) from files a command
/// may write (the git directory, a repository in the workspace). Started
/// as `git`, orch enters a domain that writes what the commands may and
/// the CLI's git's own folders ([`GIT_WRITES`]) and runs the real git:
/// whatever that runs is below the CLI's domain.
pub(crate) const NAMES: &[&str] = &["bash", "sh", "git"];

/// The folders a command may write, one absolute path per line, in the
/// CLI's environment (see [`enter_domain`]).
pub(crate) const WRITES: &str = "ORCH_SHELL_WRITES";

/// The folders the git a CLI starts may write, as [`WRITES`]: the
/// commands' and the CLI's git's own (OpenCode's snapshots). Not the
/// CLI's other folders: a filter that git runs could plant a program
/// there that the CLI runs (OpenCode's `rg` in its cache).
pub(crate) const GIT_WRITES: &str = "ORCH_GIT_WRITES";

/// The `PATH` a CLI was given, when folders were left out of it (see
/// [`crate::path_env::Trees::path_without`]): a shell started with this `PATH` was started by
/// the CLI, and gives its command [`COMMAND_PATH`] instead.
pub(crate) const CLI_PATH: &str = "ORCH_CLI_PATH";

/// The whole `PATH` the agent was given: what its commands get back.
pub(crate) const COMMAND_PATH: &str = "ORCH_COMMAND_PATH";

/// The `PATH` a command started with `path` gets, when its shell was
/// started by the CLI: `path` holds the CLI's shells' folder (the first of
/// `cli`) and none of the folders left out of the CLI's `PATH` (those of
/// `full` not in `cli`). Then the whole `PATH` (`full`) stands where the
/// folder stood, and what the CLI added around it stays (Copilot CLI adds
/// its ripgrep's folder and drops repeated folders). `None` otherwise: a
/// shell that a command or a script started, whose `PATH` is theirs (one
/// that put its own folders first, as pyenv does, keeps them).
pub(crate) fn commands_path(
    path: &std::ffi::OsStr,
    cli: &std::ffi::OsStr,
    full: &std::ffi::OsStr,
) -> Option<std::ffi::OsString> {
    let entries = |p: &std::ffi::OsStr| std::env::split_paths(p).collect::<Vec<PathBuf>>();
    let (path, cli, full) = (entries(path), entries(cli), entries(full));
    let folder = cli.first()?;
    let left_out: Vec<&PathBuf> = full.iter().filter(|d| !cli.contains(d)).collect();
    if left_out.is_empty() || path.iter().any(|d| left_out.contains(&d)) {
        return None;
    }
    let at = path.iter().position(|d| d == folder)?;
    let given = path[..at]
        .iter()
        .chain(&full)
        .chain(path[at + 1..].iter().filter(|d| !full.contains(d)));
    std::env::join_paths(given).ok()
}

/// The program a CLI's shells are: orch's own, as the run's own file in a
/// folder no agent may write, made when an attempt first needs it (never
/// for a preview): a hard link to the running program (whose contents the
/// kernel keeps from being written while it runs: `ETXTBSY`), or a copy of
/// it where a link cannot be made (another file system; the program was
/// replaced since orch started). Each attempt's shells are hard links to
/// this file, so none can dangle (a dangling shell would send a CLI to the
/// next `bash` on its `PATH`, in its own domain), and nothing done to the
/// path the user started orch by (a rebuild, an agent that may write it)
/// changes them. Removed when the last holder is dropped.
#[derive(Debug)]
pub(crate) struct Program {
    /// Where it is meant to be (shown); another run's preview may hold
    /// that name, then a new one beside it is taken.
    path: PathBuf,
    made: std::sync::OnceLock<Result<PathBuf, String>>,
}

/// Names the shells' folder, so that a shell never takes another orch's
/// shell for the real one (orch run by an agent of orch's own).
const MARK: &str = ".orch-shells";

impl Program {
    /// The run's program, to be made at `path` (or beside it).
    pub(crate) fn new(path: PathBuf) -> Self {
        Self {
            path,
            made: Default::default(),
        }
    }

    /// Where it is meant to be.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn ready(&self) -> Result<&Path, String> {
        match self.made.get_or_init(|| self.make()) {
            Ok(p) => Ok(p),
            Err(e) => Err(e.clone()),
        }
    }

    fn make(&self) -> Result<PathBuf, String> {
        use std::os::unix::fs::DirBuilderExt;
        let fail = |e: std::io::Error| {
            format!(
                "cannot give the agent's shells orch's program at `{}`: {e}",
                self.path.display()
            )
        };
        if let Some(parent) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(fail)?;
        }
        let mut at = self.path.clone();
        for attempt in 0..8 {
            match Self::place(&at) {
                Ok(()) => return Ok(at),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 7 => {
                    let mut name = self.path.as_os_str().to_owned();
                    name.push(format!("-{}-{attempt}", std::process::id()));
                    at = PathBuf::from(name);
                }
                Err(e) => return Err(fail(e)),
            }
        }
        Err(fail(std::io::ErrorKind::AlreadyExists.into()))
    }

    /// A hard link to the running program at `at`, else a copy of it.
    fn place(at: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let linked = nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            "/proc/self/exe",
            nix::fcntl::AT_FDCWD,
            at,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        );
        match linked {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::EEXIST) => return Err(std::io::ErrorKind::AlreadyExists.into()),
            Err(_) => {}
        }
        let mut from = std::fs::File::open("/proc/self/exe")?;
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o500)
            .open(at)?;
        std::io::copy(&mut from, &mut to)
            .map(|_| ())
            .inspect_err(|_| {
                let _ = std::fs::remove_file(at);
            })
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Some(Ok(at)) = self.made.get() {
            let _ = std::fs::remove_file(at);
        }
    }
}

/// Make [`NAMES`] in `folder`, each a hard link to `program`, and the mark
/// that names the folder.
pub(crate) fn make(folder: &Path, program: &Program) -> std::io::Result<()> {
    let program = program.ready().map_err(std::io::Error::other)?;
    std::fs::create_dir_all(folder)?;
    std::fs::write(folder.join(MARK), "")?;
    for name in NAMES {
        std::fs::hard_link(program, folder.join(name))?;
    }
    Ok(())
}

/// When orch was started as one of [`NAMES`] (by a CLI, through its
/// shells' folder): enter a new domain and become the real shell. `None`: orch
/// was started as itself.
#[cfg(target_os = "linux")]
pub(crate) fn run_if_started_as_shell() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let arg0 = args.next()?;
    let name = Path::new(&arg0).file_name()?.to_str()?;
    let name = NAMES.iter().find(|n| **n == name)?;
    let rest: Vec<OsString> = args.collect();
    Some(become_shell(name, &arg0, &rest))
}

#[cfg(target_os = "linux")]
fn become_shell(name: &str, arg0: &OsString, rest: &[OsString]) -> ExitCode {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(real) = real_shell(name, &path) else {
        eprintln!("orch: no `{name}` on PATH but orch's own: the command cannot run");
        return ExitCode::from(127);
    };
    let shell_started = SHELLS.contains(&name);
    let writes = std::env::var_os(if shell_started { WRITES } else { GIT_WRITES });
    if let Err(e) = enter_domain(writes) {
        // Fail closed: a command in its CLI's domain could reach into it.
        eprintln!("orch: `{name}` cannot get a sandbox domain of its own: {e}");
        return ExitCode::from(126);
    }
    let mut shell = std::process::Command::new(&real);
    shell.arg0(arg0).args(rest);
    if shell_started {
        // Started by the CLI: the command gets the folders left out of the
        // CLI's PATH back.
        if let (Some(cli), Some(full)) = (
            std::env::var_os(CLI_PATH).filter(|v| !v.is_empty()),
            std::env::var_os(COMMAND_PATH).filter(|v| !v.is_empty()),
        ) && let Some(path) = commands_path(&path, &cli, &full)
        {
            shell.env("PATH", path);
        }
        for var in unwritable_homes() {
            shell.env_remove(var);
        }
        // The CLI's git reads no global configuration (a filter planted in
        // the home would run in the CLI's domain); the command's may.
        if std::env::var_os("GIT_CONFIG_GLOBAL").is_some_and(|v| v == "/dev/null") {
            shell.env_remove("GIT_CONFIG_GLOBAL");
        }
    }
    let err = shell.exec();
    eprintln!("orch: cannot run `{}`: {err}", real.display());
    ExitCode::from(126)
}

/// The CLI's own folders for settings, data, cache and state, where the
/// CLI's environment names them (Copilot CLI, OpenCode): the command may
/// not write there, so its programs go back to their defaults in the home.
#[cfg(target_os = "linux")]
fn unwritable_homes() -> Vec<&'static str> {
    let Some(writes) = std::env::var_os(WRITES) else {
        return Vec::new();
    };
    let writes = listed(&writes);
    [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
    ]
    .into_iter()
    .filter(|var| {
        std::env::var_os(var).is_some_and(|v| !writes.iter().any(|w| Path::new(&v).starts_with(w)))
    })
    .collect()
}

/// The absolute paths of a [`WRITES`] list, one per line.
#[cfg(target_os = "linux")]
fn listed(list: &std::ffi::OsStr) -> Vec<&Path> {
    use std::os::unix::ffi::OsStrExt;
    list.as_bytes()
        .split(|b| *b == b'\n')
        .map(|p| Path::new(std::ffi::OsStr::from_bytes(p)))
        .filter(|p| p.is_absolute())
        .collect()
}

/// The next executable file called `name` on `path` (absolute folders
/// only), else in `/usr/bin` or `/bin`, that is not orch's own program
/// nor in any orch's shells' folder.
#[cfg(target_os = "linux")]
fn real_shell(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    let me = std::fs::metadata("/proc/self/exe").ok()?;
    std::env::split_paths(path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .filter(|d| d.is_absolute() && !d.join(MARK).exists())
        .map(|d| d.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate).is_ok_and(|m| {
                m.is_file()
                    && m.permissions().mode() & 0o111 != 0
                    && (m.dev(), m.ino()) != (me.dev(), me.ino())
            })
        })
}

/// Enter a Landlock domain below the current one. It takes away writes
/// beneath every folder [`WRITES`] does not name (the CLI's own state:
/// its settings and sessions, which the CLI reads again), and nothing
/// else: the domains above still decide the rest. Without [`WRITES`] (a
/// shell started with an emptied environment, below the first) it only
/// separates. At the kernel's limit of stacked domains (`E2BIG`) there is
/// no telling whether the shell is below its CLI or in its domain, so the
/// command does not run.
#[cfg(target_os = "linux")]
fn enter_domain(writes: Option<std::ffi::OsString>) -> Result<(), String> {
    use landlock::{RestrictSelfError, RulesetError};
    let abi =
        super::landlock::kernel_abi().map_err(|errno| format!("no Landlock (errno {errno})"))?;
    let abi = ABI::from(abi as i32);
    let all = AccessFs::from_all(abi);
    let mut rules: Vec<(PathBuf, landlock::BitFlags<AccessFs>)> = Vec::new();
    match writes {
        None => rules.push(("/".into(), all)),
        Some(list) => {
            let read = AccessFs::from_read(abi);
            let device = (AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev) & all;
            rules.push(("/".into(), read));
            rules.push(("/dev".into(), read | device));
            rules.extend(listed(&list).into_iter().map(|p| (p.to_path_buf(), all)));
        }
    }
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .and_then(|r| r.create())
        .map_err(|e| e.to_string())?;
    for (path, access) in rules {
        // A folder that is gone cannot be written anyway.
        let Ok(fd) = PathFd::new(&path) else { continue };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("`{}`: {e}", path.display()))?;
    }
    match created.restrict_self() {
        Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
        Ok(_) => Err("the kernel did not enforce the ruleset".into()),
        Err(RulesetError::RestrictSelf(RestrictSelfError::RestrictSelfCall { source, .. }))
            if source.raw_os_error() == Some(libc::E2BIG) =>
        {
            Err(
                "the kernel stacks at most 16 sandbox domains, and this shell is at the \
                 limit (run a shell this deep by its path, such as /bin/bash, to stay in \
                 the domain it is started from)"
                    .into(),
            )
        }
        Err(e) => Err(e.to_string()),
    }
}
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The real shell is the next of its name on PATH that is not orch's
    /// program (here the test's), past relative folders.
    #[test]
    fn the_real_shell_is_the_next_that_is_not_orch() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours");
        let other = dir.path().join("other");
        std::fs::create_dir(&ours).unwrap();
        std::fs::create_dir(&other).unwrap();
        let me = std::fs::canonicalize("/proc/self/exe").unwrap();
        std::os::unix::fs::symlink(&me, ours.join("bash")).unwrap();
        std::fs::copy("/bin/sh", other.join("bash")).unwrap();
        let path = std::env::join_paths([Path::new("relative"), &ours, &other]).unwrap();
        assert_eq!(real_shell("bash", &path), Some(other.join("bash")));
        let path = std::env::join_paths([&ours]).unwrap();
        let fallback = real_shell("bash", &path).unwrap();
        assert!(fallback.starts_with("/usr/bin") || fallback.starts_with("/bin"));
    }

    /// The run's program is made once, when an attempt first needs it,
    /// as the running program (the test's here); each folder's names are
    /// hard links to it, with the mark; it goes with its last holder, and
    /// the links stay whole. One never made leaves nothing.
    #[test]
    fn the_runs_program_is_made_when_needed_and_its_links_cannot_dangle() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("cache/orch-run");
        let program = std::sync::Arc::new(Program::new(at.clone()));
        assert_eq!(program.path(), at);
        assert!(!at.exists());
        make(&dir.path().join("bin"), &program).unwrap();
        make(&dir.path().join("bin2"), &program).unwrap();
        let me = std::fs::metadata("/proc/self/exe").unwrap();
        for name in NAMES {
            let m = std::fs::metadata(dir.path().join("bin").join(name)).unwrap();
            assert_eq!((m.dev(), m.ino()), (me.dev(), me.ino()), "{name}");
        }
        assert!(dir.path().join("bin").join(MARK).exists());
        drop(program);
        assert!(!at.exists());
        assert!(dir.path().join("bin/bash").is_file());
        // Another holder of the name: a new one beside it.
        let first = Program::new(dir.path().join("cache/orch-same"));
        let second = Program::new(dir.path().join("cache/orch-same"));
        make(&dir.path().join("bin3"), &first).unwrap();
        make(&dir.path().join("bin4"), &second).unwrap();
        drop(first);
        drop(second);
        let unused = Program::new(dir.path().join("cache/orch-other"));
        drop(unused);
        assert_eq!(
            std::fs::read_dir(dir.path().join("cache")).unwrap().count(),
            0
        );
    }

    /// A shell started with the CLI's PATH, or one the CLI added to, gives
    /// its command the whole PATH; one with the whole PATH already, or a
    /// PATH of a script's own, is left as it is.
    #[test]
    fn a_command_gets_the_whole_path_back_once() {
        let os = std::ffi::OsStr::new;
        let (cli, full) = (os("/s:/usr/bin"), os("/s:/ws/bin:/usr/bin"));
        let back = |p: &str| commands_path(os(p), cli, full).map(|p| p.into_string().unwrap());
        assert_eq!(back("/s:/usr/bin").as_deref(), Some("/s:/ws/bin:/usr/bin"));
        assert_eq!(
            back("/s:/usr/bin:/rg").as_deref(),
            Some("/s:/ws/bin:/usr/bin:/rg")
        );
        assert_eq!(
            back("/a:/s:/rg").as_deref(),
            Some("/a:/s:/ws/bin:/usr/bin:/rg")
        );
        assert_eq!(back("/s:/ws/bin:/usr/bin"), None);
        assert_eq!(back("/shims:/s:/ws/bin:/usr/bin"), None);
        assert_eq!(back("/usr/bin:/bin"), None);
        assert_eq!(back(""), None);
    }

    /// A folder with the mark (another orch's shells) is passed over.
    #[test]
    fn another_orchs_shells_are_not_the_real_shell() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::copy("/bin/sh", other.join("bash")).unwrap();
        std::fs::write(other.join(MARK), "").unwrap();
        let path = std::env::join_paths([&other]).unwrap();
        let found = real_shell("bash", &path).unwrap();
        assert!(!found.starts_with(&other), "{}", found.display());
    }
}

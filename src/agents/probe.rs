//! What `orch doctor` checks: which CLIs are installed, their versions, and
//! whether each invocation's argv is one the real CLI accepts (the offline
//! argument probe: the CLI parses the argv and stops before it calls a
//! model; docs/agent-cli-findings.md, "Probe method"). Every process runs
//! in its own process group under a deadline and is killed with its
//! children when it passes.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::CliFacts;
use super::adapter::adapter;
use super::invocation::{Invocation, Stdin};
use crate::confine::{Confinement, Io, Launch};
use crate::model::AgentKind;

/// One CLI as found on this machine.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Installed {
    pub(crate) kind: AgentKind,
    pub(crate) program: String,
    pub(crate) path: Option<PathBuf>,
    pub version: Option<String>,
    pub(crate) verified_version: Option<&'static str>,
    pub(crate) verified: bool,
    pub(crate) problem: Option<String>,
}

/// What a bounded run of a process gave.
#[derive(Debug)]
pub struct Bounded {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    pub(crate) elapsed: Duration,
}

/// Run a process in its own process group with a deadline; on the
/// deadline the whole group is killed.
pub fn run_bounded(
    launch: Launch,
    stdin: Option<&str>,
    timeout: Duration,
) -> std::io::Result<Bounded> {
    run_bounded_in(launch, stdin, timeout, None)
}

/// [`run_bounded`], the process confined as `confinement` says.
pub(crate) fn run_bounded_in(
    launch: Launch,
    stdin: Option<&str>,
    timeout: Duration,
    confinement: Option<&Confinement>,
) -> std::io::Result<Bounded> {
    run_bounded_started(launch, stdin, timeout, confinement, |_| {})
}

/// [`run_bounded_in`], telling `started` the process's id once it runs
/// (a process tree, for orch's endpoints to know it). The process starts
/// as an attempt's does ([`crate::confine::start`]), without a cgroup.
pub fn run_bounded_started(
    launch: Launch,
    stdin: Option<&str>,
    timeout: Duration,
    confinement: Option<&Confinement>,
    started: impl FnOnce(u32),
) -> std::io::Result<Bounded> {
    let launch = launch
        .stdin(if stdin.is_some() { Io::Pipe } else { Io::Null })
        .stdout(Io::Pipe)
        .stderr(Io::Pipe)
        .own_group();
    let start = Instant::now();
    let mut child = crate::confine::start(confinement, None, &launch)
        .map_err(|e| std::io::Error::other(e.to_string()))??;
    started(child.id());
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    if let (Some(text), Some(pipe)) = (stdin, child.stdin.take()) {
        let text = text.to_string();
        std::thread::spawn(move || {
            let _ = std::fs::File::from(pipe).write_all(text.as_bytes());
        });
    }
    let reader = |pipe: Option<OwnedFd>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(pipe) = pipe {
                let _ = std::fs::File::from(pipe)
                    .take(4 << 20)
                    .read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let mut timed_out = false;
    let ended = loop {
        match child.has_ended() {
            Ok(false) if start.elapsed() > timeout => {
                timed_out = true;
                break Ok(());
            }
            Ok(false) => std::thread::sleep(Duration::from_millis(5)),
            Ok(true) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    // The group goes (children that outlived the leader, or all of it at
    // the deadline, or on an error) before the leader is reaped: until
    // then the group's number names no other process.
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    ended?;
    let status = child.wait_blocking()?;
    Ok(Bounded {
        code: status.code(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        timed_out,
        elapsed: start.elapsed(),
    })
}

/// The first `x.y.z` in a version string.
pub(crate) fn parse_version(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .map(|w| w.trim_start_matches('v').trim_end_matches('.'))
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() >= 3
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// `program` as doctor runs it: on orch's `PATH` past the folders that
/// lead into the folder orch runs in or its repository (a relative path
/// from that folder), and not a file that leads there
/// ([`crate::path_env::here`]). Else why not, and where it was found if
/// it was.
fn find_outside_here(program: &str) -> Result<PathBuf, (String, Option<PathBuf>)> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let here = crate::path_env::here();
    if let Some(found) = here.find(program, crate::path_env::orchs_path(), &cwd) {
        return Ok(found);
    }
    let anywhere = std::env::var_os("PATH").unwrap_or_default();
    match which::which_in(program, Some(anywhere), &cwd) {
        Ok(p) => Err((
            format!(
                "`{}` is in (or leads by a link into) the folder orch runs in or its \
                 repository, where an agent could have replaced it: doctor does not run it \
                 (run doctor from another folder)",
                p.display()
            ),
            Some(p),
        )),
        Err(_) => Err((format!("`{program}` is not on PATH"), None)),
    }
}

/// Look a CLI up on PATH and ask its version (with an empty temporary
/// home, so no user configuration is read).
pub fn installed(kind: AgentKind, program: &str) -> Installed {
    let verified_version = kind.pinned_version();
    let mut found = Installed {
        kind,
        program: program.to_string(),
        path: None,
        version: None,
        verified_version,
        verified: false,
        problem: None,
    };
    // Not from a folder an agent could have written: orch runs it
    // unconfined.
    let path = match find_outside_here(program) {
        Ok(p) => p,
        Err((problem, path)) => {
            found.problem = Some(problem);
            found.path = path;
            return found;
        }
    };
    found.path = Some(path.clone());
    // A home of its own, made new (mode 0700, an unguessable name): a
    // predictable one in the shared temporary folder could be another
    // user's, made first, with a link or a `.npmrc` waiting in it.
    let home = match tempfile::Builder::new()
        .prefix(&format!("orch-doctor-{kind}-"))
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
    {
        Ok(h) => h,
        Err(e) => {
            found.problem = Some(format!("cannot make a temporary home for `--version`: {e}"));
            return found;
        }
    };
    let home = home.path();
    let mut cmd = Command::new(&path);
    cmd.arg("--version")
        .env_clear()
        .env("HOME", home)
        .env("PATH", crate::path_env::orchs_path())
        .env("COPILOT_AUTO_UPDATE", "false")
        .env(
            "COPILOT_CACHE_HOME",
            std::env::var_os("COPILOT_CACHE_HOME").unwrap_or_else(|| home.as_os_str().to_owned()),
        )
        .env("NO_COLOR", "1");
    match run_bounded(
        Launch::from_command(&cmd, false),
        None,
        Duration::from_secs(60),
    ) {
        Ok(b) if b.code == Some(0) => {
            found.version = parse_version(&b.stdout).or_else(|| parse_version(&b.stderr));
            found.verified =
                found.version.as_deref() == verified_version && verified_version.is_some();
            if found.version.is_none() {
                found.problem = Some(format!("no version in `{} --version` output", program));
            }
        }
        Ok(b) if b.timed_out => {
            found.problem = Some("`--version` did not answer within 60 s".into())
        }
        Ok(b) => {
            found.problem = Some(format!(
                "`--version` exited {}: {}",
                b.code.map_or("by a signal".into(), |c| c.to_string()),
                b.stderr.lines().next().unwrap_or("").trim()
            ))
        }
        Err(e) => found.problem = Some(format!("cannot run `{program}`: {e}")),
    }
    found
}

/// The verdict of one offline argument probe.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct ProbeResult {
    pub(crate) accepted: bool,
    /// The CLI's own message when it rejected the argv (or why the probe
    /// could not run).
    pub(crate) message: Option<String>,
    pub(crate) exit_code: Option<i32>,
    pub(crate) elapsed_ms: u128,
}

/// Run an invocation's offline argument probe: the adapter's probe argv and
/// environment (no credentials, closed loopback endpoints), with the
/// invocation's files written first and removed after.
pub(crate) fn probe(kind: AgentKind, inv: &Invocation) -> ProbeResult {
    let adapter = adapter(kind);
    let p = adapter.probe(inv);
    let fail = |message: String| ProbeResult {
        accepted: false,
        message: Some(message),
        exit_code: None,
        elapsed_ms: 0,
    };
    // As doctor finds it (see `installed`): the probe of a full-access
    // agent runs unconfined. A CLI a run starts from an undumpable copy
    // (made by the run) is probed from the program it copies.
    let program = inv
        .undumpable
        .as_ref()
        .map_or_else(|| inv.program.clone(), |c| c.source().display().to_string());
    let path = match find_outside_here(&program) {
        Ok(p) => p,
        Err((problem, _)) => return fail(problem),
    };
    if let Err(e) = write_files(inv) {
        return fail(format!("cannot prepare the attempt's own directory: {e}"));
    }
    let mut cmd = inv.command(path, &p.args, |n| std::env::var(n).ok());
    for (k, v) in &p.env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let stdin = match &inv.stdin {
        Stdin::Null => None,
        Stdin::Text(t) => Some(t.as_str()),
    };
    let result = run_bounded_in(
        Launch::from_command(&cmd, inv.inherit_env),
        stdin,
        Duration::from_secs(60),
        inv.confinement.as_ref(),
    );
    remove_files(inv);
    match result {
        Err(e) => fail(format!("cannot run `{}`: {e}", inv.program)),
        Ok(b) if b.timed_out => ProbeResult {
            accepted: false,
            message: Some("the probe did not finish within 60 s".into()),
            exit_code: None,
            elapsed_ms: b.elapsed.as_millis(),
        },
        Ok(b) => {
            let verdict = (p.verdict)(b.code, &b.stdout, &b.stderr);
            ProbeResult {
                accepted: verdict.is_ok(),
                message: verdict.err(),
                exit_code: b.code,
                elapsed_ms: b.elapsed.as_millis(),
            }
        }
    }
}

/// Make an invocation's own directory, when it needs one (files, its own
/// home or temporary folder, or confinement), and write its files there.
/// The directory must not exist yet: one that does was not made by orch
/// for this attempt, so nothing is written and the attempt cannot start.
pub fn write_files(inv: &Invocation) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    // Every per-invocation directory the environment names (HOME, TMPDIR,
    // CODEX_HOME, CLAUDE_CONFIG_DIR, XDG_*...) must exist: some CLIs refuse
    // to start otherwise.
    let dirs: Vec<&std::path::Path> = inv
        .env
        .iter()
        .filter_map(|var| match &var.value {
            super::invocation::EnvValue::Plain(v) => Some(std::path::Path::new(v.as_str())),
            _ => None,
        })
        .filter(|p| {
            p.starts_with(&inv.dir)
                && *p != inv.dir
                && !inv.files.iter().any(|f| f.path == *p)
                && !inv
                    .shells
                    .as_ref()
                    .is_some_and(|s| p.starts_with(&s.folder))
        })
        .collect();
    if inv.files.is_empty() && dirs.is_empty() && inv.confinement.is_none() {
        return Ok(());
    }
    if let Some(root) = inv.dir.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)?;
    }
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&inv.dir)
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "`{}` exists already; an attempt's own directory must be new",
                        inv.dir.display()
                    ),
                )
            } else {
                e
            }
        })?;
    for d in dirs {
        std::fs::create_dir_all(d)?;
    }
    for f in &inv.files {
        if let Some(parent) = f.path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&f.path, &f.content)?;
    }
    if let Some(shells) = &inv.shells {
        let program = shells
            .program
            .as_ref()
            .map_err(|e| std::io::Error::other(e.clone()))?;
        crate::confine::shell::make(&shells.folder, program)?;
        for d in &shells.git_dirs {
            std::fs::create_dir_all(d)?;
        }
    }
    if let Some(git) = &inv.git {
        git.make();
    }
    Ok(())
}

/// Make the undumpable copy of the CLI's own program the invocation is
/// started from, if it has one (see [`crate::confine::undumpable`]): once
/// per program file, the first time a copy of it (Codex's is about
/// 300 MB). Blocking: `orch run` calls it off the async workers.
pub fn make_program(inv: &Invocation) -> std::io::Result<()> {
    inv.undumpable.as_deref().map_or(Ok(()), make_copy)
}

/// [`make_program`] for the copy itself.
pub(crate) fn make_copy(copy: &crate::confine::undumpable::ExecOnlyCopy) -> std::io::Result<()> {
    copy.make().map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot copy the CLI's program `{}` to `{}` (docs/confinement.md, \"Codex\"): {e}",
                copy.source().display(),
                copy.folder().display()
            ),
        )
    })
}

/// Remove the files an invocation wrote outside its own directory.
///
/// Files inside the attempt's own directory are left alone: the directory
/// goes as a whole when the attempt ends (removed without following
/// links). Removing them one by one would follow whatever the agent put in
/// their place: a CLI folder swapped for a link to another directory would
/// have orch delete a file there that the agent itself may not touch.
pub(crate) fn remove_files(inv: &Invocation) {
    for f in inv.files.iter().filter(|f| !f.path.starts_with(&inv.dir)) {
        let _ = std::fs::remove_file(&f.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `doctor` runs `--version` with a home of its own: new, private,
    /// named past guessing, and gone after.
    #[test]
    fn the_version_runs_in_a_new_private_home() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let seen = dir.path().join("seen");
        let cli = dir.path().join("fake-cli");
        std::fs::write(
            &cli,
            format!(
                "#!/bin/sh\nstat -c '%a' \"$HOME\" > {seen}\necho \"$HOME\" >> {seen}\nls -A \"$HOME\" >> {seen}\necho '1.2.3'\n",
                seen = seen.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
        let found = installed(AgentKind::Claude, cli.to_str().unwrap());
        assert_eq!(found.version.as_deref(), Some("1.2.3"), "{found:?}");
        let seen = std::fs::read_to_string(&seen).unwrap();
        let mut lines = seen.lines();
        assert_eq!(lines.next(), Some("700"), "{seen}");
        let home = lines.next().unwrap();
        assert_eq!(lines.next(), None, "the home was not empty: {seen}");
        let name = std::path::Path::new(home)
            .file_name()
            .unwrap()
            .to_string_lossy();
        // Not the old predictable name (`orch-doctor-<pid>-<kind>`).
        assert!(name.starts_with("orch-doctor-claude-"), "{home}");
        assert_ne!(
            name,
            format!("orch-doctor-{}-claude", std::process::id()),
            "{home}"
        );
        assert!(!std::path::Path::new(home).exists(), "{home} is left");
    }

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("2.1.197 (Claude Code)").as_deref(),
            Some("2.1.197")
        );
        assert_eq!(
            parse_version("codex-cli 0.169.0").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(
            parse_version("GitHub Copilot CLI 1.0.102.").as_deref(),
            Some("1.0.102")
        );
        assert_eq!(
            parse_version("GitHub Copilot CLI 1.0.102").as_deref(),
            Some("1.0.102")
        );
        assert_eq!(parse_version("no version"), None);
    }

    #[test]
    fn an_own_directory_that_exists_already_is_refused() {
        use super::super::invocation::{Enforced, Enforcement, InvocationFile};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("p-a-0123456789abcdef");
        let na = || Enforced::none("test");
        let inv = Invocation {
            program: "true".into(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: Stdin::Null,
            cwd: root.path().into(),
            dir: dir.clone(),
            files: vec![InvocationFile {
                path: dir.join("claude/settings.json"),
                content: "{}".into(),
            }],
            enforcement: Enforcement {
                internal: na(),
                mcp: na(),
                permission: na(),
                max_turns: na(),
            },
            inherit_env: false,
            prompt_tokens: Default::default(),
            confinement: None,
            shown: None,
            git: None,
            shells: None,
            undumpable: None,
        };
        write_files(&inv).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("claude/settings.json")).unwrap(),
            "{}"
        );
        // Planted before the attempt: nothing is written, the attempt cannot start.
        std::fs::remove_file(dir.join("claude/settings.json")).unwrap();
        let e = write_files(&inv).unwrap_err();
        assert!(e.to_string().contains("exists already"), "{e}");
        assert!(!dir.join("claude/settings.json").exists());
    }

    #[test]
    fn files_behind_a_link_the_agent_planted_are_not_removed() {
        use super::super::invocation::{Enforced, Enforcement, InvocationFile};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("p-a-0123456789abcdef");
        let elsewhere = root.path().join("elsewhere");
        let na = || Enforced::none("test");
        let inv = Invocation {
            program: "true".into(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: Stdin::Null,
            cwd: root.path().into(),
            dir: dir.clone(),
            files: vec![InvocationFile {
                path: dir.join("gemini/.gemini/settings.json"),
                content: "{}".into(),
            }],
            enforcement: Enforcement {
                internal: na(),
                mcp: na(),
                permission: na(),
                max_turns: na(),
            },
            inherit_env: false,
            prompt_tokens: Default::default(),
            confinement: None,
            shown: None,
            git: None,
            shells: None,
            undumpable: None,
        };
        write_files(&inv).unwrap();
        // The agent swaps its (writable) CLI folder for a link elsewhere.
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("settings.json"), "theirs").unwrap();
        std::fs::remove_dir_all(dir.join("gemini/.gemini")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("gemini/.gemini")).unwrap();
        remove_files(&inv);
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("settings.json")).unwrap(),
            "theirs"
        );
    }

    #[test]
    fn deadline_kills_the_group() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30"]);
        let b = run_bounded(
            Launch::from_command(&cmd, true),
            None,
            Duration::from_millis(200),
        )
        .unwrap();
        assert!(b.timed_out);
        assert!(b.elapsed < Duration::from_secs(5));
    }
}

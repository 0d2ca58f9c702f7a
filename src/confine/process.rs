//! Confining one process (and everything it starts) before it executes:
//! the child itself enters its attempt's cgroup and Landlock ruleset
//! between fork and exec.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use serde::Serialize;

use super::policy::Policy;

/// How one process tree is confined: the policy, and the Landlock ABI the
/// kernel speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confinement {
    pub policy: Policy,
    pub abi: u32,
}

/// Confinement was expected but could not be set up: the process must not
/// start.
#[derive(Debug, thiserror::Error)]
#[error("cannot confine the process: {0}")]
pub struct ConfineError(pub String);

impl Confinement {
    /// Start a process with `spawn`, given `cmd`: the process enters the
    /// confinement between fork and exec (see [`start`]), so it, and
    /// everything it starts, are confined; no thread of orch's ever is.
    /// When the confinement cannot be set up, `spawn` never runs.
    pub fn spawn_with<C: Spawnable + Send, T: Send>(
        &self,
        cmd: &mut C,
        spawn: impl FnOnce(&mut C) -> T + Send,
    ) -> Result<T, ConfineError> {
        start(Some(self), None, cmd, spawn)
    }
}

/// Start a process with `spawn`, given `cmd`, confined by `confinement`
/// when there is one and in `tree`'s cgroup when it has one; when either
/// cannot be set up, `spawn` never runs.
///
/// The child does both itself, between fork and exec
/// ([`ChildEntry::enter`]): it moves into the cgroup (writing `0` to the
/// cgroup's `cgroup.procs`, opened here), then enters the attempt's
/// Landlock ruleset (built here), then executes the program. So it runs
/// no instruction of the agent's outside its cgroup or its ruleset, and
/// whatever it starts is in both. Should either fail, the child never
/// executes it and `spawn` returns the error. Confined, `spawn` runs on a
/// thread its level's starter created, with the system-call filter,
/// `no_new_privs` and no capabilities already held (see
/// [`super::starter`]), which the child inherits at fork: that thread
/// never enters the ruleset (a thread of orch's inside an agent's Landlock
/// domain could be signalled by the agent, and all of orch stopped or
/// killed with it).
pub fn start<C: Spawnable + Send, T: Send>(
    confinement: Option<&Confinement>,
    tree: Option<&super::ProcessTree>,
    cmd: &mut C,
    spawn: impl FnOnce(&mut C) -> T + Send,
) -> Result<T, ConfineError> {
    let procs = match tree.and_then(super::ProcessTree::procs_for_child) {
        Some(Ok(fd)) => Some(fd),
        Some(Err(e)) => {
            return Err(ConfineError(format!(
                "cannot open the attempt's cgroup for the process to join: {e}"
            )));
        }
        None => None,
    };
    let Some(confinement) = confinement else {
        if procs.is_some() {
            cmd.before_exec(ChildEntry {
                procs,
                ruleset: None,
            });
        }
        return Ok(spawn(cmd));
    };
    confined(confinement, procs, cmd, spawn)
}

#[cfg(target_os = "linux")]
fn confined<C: Spawnable + Send, T: Send>(
    confinement: &Confinement,
    procs: Option<OwnedFd>,
    cmd: &mut C,
    spawn: impl FnOnce(&mut C) -> T + Send,
) -> Result<T, ConfineError> {
    confinement.policy.hiding_holds().map_err(ConfineError)?;
    let ruleset = super::landlock::prepare(&confinement.policy, confinement.abi)
        .map_err(|e| ConfineError(e.to_string()))?
        .into_fd();
    cmd.before_exec(ChildEntry {
        procs,
        ruleset: Some(ruleset),
    });
    super::starter::run(confinement.policy.permission, move || {
        if !super::starter::holds_the_filter() {
            return Err(ConfineError(
                "the starting thread does not hold the system-call filter".into(),
            ));
        }
        Ok(spawn(cmd))
    })
    .map_err(ConfineError)?
}

#[cfg(not(target_os = "linux"))]
fn confined<C: Spawnable + Send, T: Send>(
    _confinement: &Confinement,
    _procs: Option<OwnedFd>,
    _cmd: &mut C,
    _spawn: impl FnOnce(&mut C) -> T + Send,
) -> Result<T, ConfineError> {
    Err(ConfineError("confinement needs Linux (Landlock)".into()))
}

/// What a child does between fork and exec to join its attempt: move into
/// the attempt's cgroup, then enter its Landlock ruleset. Both descriptors
/// were opened by orch before the fork (close-on-exec: the program never
/// holds them).
#[derive(Debug)]
pub struct ChildEntry {
    /// The attempt cgroup's `cgroup.procs`, open for writing.
    procs: Option<OwnedFd>,
    /// The attempt's Landlock ruleset.
    ruleset: Option<OwnedFd>,
}

impl ChildEntry {
    /// Run in the child, after fork and before exec: async-signal-safe
    /// (two raw system calls on descriptors already open; nothing
    /// allocates or takes a lock, the errors included). The child holds
    /// the system-call filter already, which allows both calls. An error
    /// stops the child before it executes anything (the spawn fails).
    fn enter(&self) -> io::Result<()> {
        if let Some(fd) = &self.procs {
            // SAFETY: write(2) of a 1-byte static buffer to a descriptor
            // this value owns. "0" moves the calling process.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if n != 1 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
        }
        #[cfg(target_os = "linux")]
        if let Some(fd) = &self.ruleset {
            // SAFETY: a plain system call with integer arguments.
            if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) } != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(not(target_os = "linux"))]
        if self.ruleset.is_some() {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        Ok(())
    }
}

/// A command that can be told what its child does before exec: std's or
/// tokio's.
pub trait Spawnable {
    /// Have the child run `entry` ([`ChildEntry::enter`]) between fork and
    /// exec, after everything else the command sets up there.
    fn before_exec(&mut self, entry: ChildEntry);
}

impl Spawnable for std::process::Command {
    fn before_exec(&mut self, entry: ChildEntry) {
        use std::os::unix::process::CommandExt;
        // SAFETY: `ChildEntry::enter` is async-signal-safe (see there).
        unsafe {
            self.pre_exec(move || entry.enter());
        }
    }
}

impl Spawnable for tokio::process::Command {
    fn before_exec(&mut self, entry: ChildEntry) {
        // SAFETY: `ChildEntry::enter` is async-signal-safe (see there).
        unsafe {
            self.pre_exec(move || entry.enter());
        }
    }
}

/// Keep orch's own memory to itself: no core dump of it (the API keys in
/// its environment would be in one, written wherever it runs), and its
/// `/proc` entries not readable by other processes of the user. Confined
/// agents cannot reach it anyway (Landlock refuses tracing it and the
/// system-call filter changing its limits); this also covers agents orch
/// does not confine.
pub fn keep_orch_private() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

/// Keep the descriptors orch inherited (beyond standard input, output and
/// error) from every program it starts: whatever started orch may have
/// left files, sockets or a terminal open, and an agent holding one could
/// write through it where its confinement would refuse to open the path.
/// Called first thing, before orch opens anything of its own.
pub fn keep_inherited_descriptors() {
    #[cfg(target_os = "linux")]
    {
        const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
        // SAFETY: close_range with integer arguments only marks descriptors.
        let marked = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                CLOSE_RANGE_CLOEXEC,
            )
        } == 0;
        if marked {
            return;
        }
        // Before Linux 5.11: one by one.
        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
            return;
        };
        let fds: Vec<i32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|fd| *fd > 2)
            .collect();
        for fd in fds {
            // SAFETY: fcntl on a descriptor number; a closed one fails harmlessly.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child whose move into its cgroup fails (here a descriptor it
    /// cannot write) never executes its program: the spawn fails.
    #[test]
    fn a_child_that_cannot_join_its_cgroup_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let procs: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let mut cmd = std::process::Command::new("touch");
        cmd.arg(&ran);
        cmd.before_exec(ChildEntry {
            procs: Some(procs),
            ruleset: None,
        });
        let e = cmd.status().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
        assert!(!ran.exists());
    }

    /// Nor does one whose ruleset cannot be entered.
    #[test]
    fn a_child_that_cannot_enter_its_ruleset_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        let not_a_ruleset: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let mut cmd = std::process::Command::new("touch");
        cmd.arg(&ran);
        cmd.before_exec(ChildEntry {
            procs: None,
            ruleset: Some(not_a_ruleset),
        });
        assert!(cmd.status().is_err());
        assert!(!ran.exists());
    }
}

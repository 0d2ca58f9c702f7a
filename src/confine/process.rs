//! Confining one process (and everything it starts) before it executes:
//! born in its attempt's cgroup, it enters the attempt's Landlock ruleset
//! before it executes.

use std::io;
use std::os::fd::OwnedFd;

use serde::Serialize;

use super::launch::{Child, Launch};
use super::policy::Policy;

/// How one process tree is confined: the policy, and the Landlock ABI the
/// kernel speaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confinement {
    pub(crate) policy: Policy,
    pub(crate) abi: u32,
}

/// Confinement was expected but could not be set up: the process must not
/// start.
#[derive(Debug, thiserror::Error)]
#[error("cannot confine the process: {0}")]
pub(crate) struct ConfineError(pub(crate) String);

impl Confinement {
    /// The attempt's Landlock ruleset, once the policy's hidden paths are
    /// known to hold what they hide.
    #[cfg(target_os = "linux")]
    fn ruleset(&self) -> Result<OwnedFd, ConfineError> {
        self.policy.hiding_holds().map_err(ConfineError)?;
        Ok(super::landlock::prepare(&self.policy, self.abi)
            .map_err(|e| ConfineError(e.to_string()))?
            .into_fd())
    }

    #[cfg(not(target_os = "linux"))]
    fn ruleset(&self) -> Result<OwnedFd, ConfineError> {
        Err(ConfineError("confinement needs Linux (Landlock)".into()))
    }

    /// Run `work` on a thread its level's starter made (the system-call
    /// filter, `no_new_privs` and no capabilities held: see
    /// [`super::starter`]), which the processes it starts inherit.
    #[cfg(target_os = "linux")]
    fn on_starter<T: Send>(&self, work: impl FnOnce() -> T + Send) -> Result<T, ConfineError> {
        super::starter::run(self.policy.permission, move || {
            if !super::starter::holds_the_filter() {
                return Err(ConfineError(
                    "the starting thread does not hold the system-call filter".into(),
                ));
            }
            Ok(work())
        })
        .map_err(ConfineError)?
    }

    #[cfg(not(target_os = "linux"))]
    fn on_starter<T: Send>(&self, _work: impl FnOnce() -> T + Send) -> Result<T, ConfineError> {
        Err(ConfineError("confinement needs Linux (Landlock)".into()))
    }
}

/// Start the process `launch` describes, confined by `confinement` when
/// there is one and in `tree`'s cgroup when it has one; when either cannot
/// be set up, nothing starts.
///
/// The process is born in the cgroup (see [`super::launch`]), enters the
/// attempt's Landlock ruleset (built here), then executes the program: it
/// runs no instruction of the agent's outside its cgroup or its ruleset,
/// and whatever it starts is in both. Confined, it is started by a thread
/// its level's starter created, with the system-call filter,
/// `no_new_privs` and no capabilities already held (see
/// [`super::starter`]), which the child inherits: that thread never enters
/// the ruleset (a thread of orch's inside an agent's Landlock domain could
/// be signalled by the agent, and all of orch stopped or killed with it).
pub(crate) fn start(
    confinement: Option<&Confinement>,
    tree: Option<&super::ProcessTree>,
    launch: &Launch,
) -> Result<io::Result<Child>, ConfineError> {
    let cgroup = match tree.and_then(super::ProcessTree::cgroup_for_child) {
        Some(Ok(fd)) => Some(fd),
        Some(Err(e)) => {
            return Err(ConfineError(format!(
                "cannot open the attempt's cgroup for the process to start in: {e}"
            )));
        }
        None => None,
    };
    let Some(confinement) = confinement else {
        return Ok(launch.spawn(cgroup.as_ref(), None));
    };
    let ruleset = confinement.ruleset()?;
    confinement.on_starter(move || launch.spawn(cgroup.as_ref(), Some(&ruleset)))
}

/// Keep orch's own memory to itself: no core dump of it (the API keys in
/// its environment would be in one, written wherever it runs), and its
/// `/proc` entries not readable by other processes of the user. Confined
/// agents cannot reach it anyway (Landlock refuses tracing it and the
/// system-call filter changing its limits); this also covers agents orch
/// does not confine.
pub(crate) fn keep_orch_private() {
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_dumpable(false);
}

/// Keep the descriptors orch inherited (beyond standard input, output and
/// error) from every program it starts: whatever started orch may have
/// left files, sockets or a terminal open, and an agent holding one could
/// write through it where its confinement would refuse to open the path.
/// Called first thing, before orch opens anything of its own.
pub(crate) fn keep_inherited_descriptors() {
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

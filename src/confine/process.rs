//! Confining one process (and everything it starts) before it executes.

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
    /// Run `spawn`, which starts a process, on a thread of its own that
    /// enters the confinement first: the process it starts, and everything
    /// that process starts, are confined; orch's other threads are not.
    /// The thread is created by its level's starter, with the system-call
    /// filter, `no_new_privs` and no capabilities already held (see
    /// [`super::starter`]); it enters the attempt's Landlock ruleset. When
    /// the confinement cannot be set up, `spawn` never runs.
    #[cfg(target_os = "linux")]
    pub fn spawn_with<T: Send>(&self, spawn: impl FnOnce() -> T + Send) -> Result<T, ConfineError> {
        self.policy.hiding_holds().map_err(ConfineError)?;
        let prepared = super::landlock::prepare(&self.policy, self.abi)
            .map_err(|e| ConfineError(e.to_string()))?;
        super::starter::run(self.policy.permission, move || {
            prepared
                .enter()
                .map_err(|e| ConfineError(format!("cannot enter the Landlock ruleset: {e}")))?;
            Ok(spawn())
        })
        .map_err(ConfineError)?
    }

    #[cfg(not(target_os = "linux"))]
    pub fn spawn_with<T: Send>(
        &self,
        _spawn: impl FnOnce() -> T + Send,
    ) -> Result<T, ConfineError> {
        Err(ConfineError("confinement needs Linux (Landlock)".into()))
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

//! Whether the orch process that recorded a run is still alive.

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// Whether a process with this id exists (signal 0: nothing is sent). A
/// process we may not signal (`EPERM`) exists. Pid 0 and ids beyond
/// `pid_t` never name an orch process.
///
/// A pid can be reused after its process dies; a run whose pid now belongs
/// to an unrelated process looks alive until that process ends.
pub(super) fn pid_alive(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    match kill(Pid::from_raw(raw), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        assert!(pid_alive(std::process::id()));
    }

    #[test]
    fn a_reaped_child_is_not() {
        assert!(!pid_alive(crate::store::fixture::dead_pid()));
    }

    #[test]
    fn impossible_pids_are_not() {
        assert!(!pid_alive(0));
        assert!(!pid_alive(u32::MAX));
    }
}

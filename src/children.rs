//! orch's own child processes (the keeper, an agent's leader while orch
//! waits for it, git): registered while they are started, so that the
//! orphan sweep (which kills every other child of orch: orphans agents
//! left) never takes one of them. Starts run side by side (a start
//! returns once the child executed); the sweep waits until none is under
//! way while it picks its targets.

use std::collections::HashSet;
use std::process::ExitStatus;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};

/// The children orch started itself.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Held (shared) by every start under way, and (alone) by the sweep.
static STARTING: RwLock<()> = RwLock::new(());

/// The registry, locked.
pub(crate) fn locked() -> MutexGuard<'static, Option<HashSet<i32>>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// No start under way until the guard is dropped (the sweep holds it
/// while it picks its targets: a child started meanwhile is registered
/// already).
pub(crate) fn no_start() -> RwLockWriteGuard<'static, ()> {
    STARTING.write().unwrap_or_else(|e| e.into_inner())
}

/// Start a child of orch's own with `spawn`, which returns its pid when it
/// started: the sweep leaves it alone until [`forget`].
pub(crate) fn start<T>(spawn: impl FnOnce() -> (T, Option<u32>)) -> T {
    let _starting = STARTING.read().unwrap_or_else(|e| e.into_inner());
    let (started, pid) = spawn();
    if let Some(pid) = pid {
        locked().get_or_insert_with(HashSet::new).insert(pid as i32);
    }
    started
}

/// Reap orch's child `pid` with `reap` (a wait that does not block; true
/// when it reaped it), holding the registry meanwhile, and forget it once
/// reaped: its number is free from then on, and a new child of orch's
/// that gets it registers after this, never to be forgotten in its place.
pub(crate) fn reaping(pid: u32, reap: impl FnOnce() -> bool) {
    let mut own = locked();
    if reap()
        && let Some(own) = own.as_mut()
    {
        own.remove(&(pid as i32));
    }
}

/// Block until orch's child `pid` has ended, without reaping it (that is
/// for [`reaping`]).
pub(crate) fn until_ended(pid: u32) -> std::io::Result<()> {
    loop {
        // SAFETY: a siginfo is plain data; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on orch's own child, with a valid out pointer.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `child.try_wait()`, forgetting it as it is reaped (see [`reaping`]).
pub(crate) fn try_wait(child: &mut std::process::Child) -> std::io::Result<Option<ExitStatus>> {
    let mut result = Ok(None);
    reaping(child.id(), || {
        result = child.try_wait();
        matches!(result, Ok(Some(_)))
    });
    result
}

/// `child.wait()`, forgetting it as it is reaped (see [`reaping`]).
pub(crate) fn wait(child: &mut std::process::Child) -> std::io::Result<ExitStatus> {
    until_ended(child.id())?;
    try_wait(child)?.ok_or_else(|| std::io::Error::other("the child ended but was not reaped"))
}

/// Whether `pid` is one of orch's own children.
pub(crate) fn is_own(own: &Option<HashSet<i32>>, pid: i32) -> bool {
    own.as_ref().is_some_and(|o| o.contains(&pid))
}

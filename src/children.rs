//! orch's own child processes (the keeper, an agent's leader while orch
//! waits for it, git): registered while they are started, so that the
//! orphan sweep (which kills every other child of orch: orphans agents
//! left) never takes one of them. Starts run side by side (a start
//! returns once the child executed); the sweep waits until none is under
//! way while it picks its targets.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockWriteGuard};

/// The children orch started itself.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Held (shared) by every start under way, and (alone) by the sweep.
static STARTING: RwLock<()> = RwLock::new(());

/// The registry, locked.
pub fn locked() -> MutexGuard<'static, Option<HashSet<i32>>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// No start under way until the guard is dropped (the sweep holds it
/// while it picks its targets: a child started meanwhile is registered
/// already).
pub fn no_start() -> RwLockWriteGuard<'static, ()> {
    STARTING.write().unwrap_or_else(|e| e.into_inner())
}

/// Start a child of orch's own with `spawn`, which returns its pid when it
/// started: the sweep leaves it alone until [`forget`].
pub fn start<T>(spawn: impl FnOnce() -> (T, Option<u32>)) -> T {
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
pub fn reaping(pid: u32, reap: impl FnOnce() -> bool) {
    let mut own = locked();
    if reap()
        && let Some(own) = own.as_mut()
    {
        own.remove(&(pid as i32));
    }
}

/// orch's child `pid` has been waited for: a process that later gets its
/// number is not orch's.
pub fn forget(pid: u32) {
    if let Some(own) = locked().as_mut() {
        own.remove(&(pid as i32));
    }
}

/// Whether `pid` is one of orch's own children.
pub fn is_own(own: &Option<HashSet<i32>>, pid: i32) -> bool {
    own.as_ref().is_some_and(|o| o.contains(&pid))
}

//! orch's own child processes (the keeper, an agent's leader while orch
//! waits for it, git): registered while they are started, under the lock
//! the orphan sweep takes, so that the sweep (which kills every other child
//! of orch: orphans agents left) never takes one of them.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

/// The children orch started itself.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// The registry, locked (the sweep holds it while it picks its targets).
pub fn locked() -> MutexGuard<'static, Option<HashSet<i32>>> {
    OWN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Start a child of orch's own with `spawn`, which returns its pid when it
/// started: the sweep leaves it alone until [`forget`].
pub fn start<T>(spawn: impl FnOnce() -> (T, Option<u32>)) -> T {
    let mut own = locked();
    let (started, pid) = spawn();
    if let Some(pid) = pid {
        own.get_or_insert_with(HashSet::new).insert(pid as i32);
    }
    started
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

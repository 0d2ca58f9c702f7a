//! The reaper: no process an agent starts outlives its attempt, not even
//! one that left the agent's process group or session (`setsid`, a
//! daemon's double fork), which the group kill at the end of an attempt
//! misses.
//!
//! `orch run` makes itself a child subreaper: a process whose parent dies
//! is adopted by orch instead of by the system's first process. Every child
//! of orch that orch did not start itself is therefore an orphan an agent
//! left behind; after each attempt, and when the run ends, [`sweep`] kills
//! them all. orch cannot tell, once an orphan's parent is gone, which
//! attempt it came from: with attempts running side by side, a process one
//! of them left running in the background (a build daemon) is stopped when
//! any attempt ends.
//!
//! orch's own children are registered while they are started (under the
//! same lock the sweep takes, so the sweep never sees one unregistered),
//! and left to whoever waits for them.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process adopts orphans (only `orch run` does).
static ADOPTING: AtomicBool = AtomicBool::new(false);
/// The children orch started itself.
static OWN: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// Sweeps per [`sweep`]: a process that keeps forking is outrun this many
/// times at most (each sweep kills every orphan it finds).
const MAX_PASSES: usize = 64;

/// Make this process the one that adopts its descendants' orphans. Returns
/// whether it could.
pub fn adopt_orphans() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a plain prctl with integer arguments.
        let ok = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
        ADOPTING.store(ok, Ordering::SeqCst);
        ok
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Start a child of orch's own with `spawn`, which returns its pid when
/// it started: the sweep leaves it alone until [`forget`].
pub fn start_own<T>(spawn: impl FnOnce() -> (T, Option<u32>)) -> T {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    let (started, pid) = spawn();
    if let Some(pid) = pid {
        own.get_or_insert_with(HashSet::new).insert(pid as i32);
    }
    started
}

/// orch's child `pid` has been waited for: a process that later gets its
/// number is not orch's.
pub fn forget(pid: u32) {
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(own) = own.as_mut() {
        own.remove(&(pid as i32));
    }
}

/// Kill and reap every orphan orch adopted; the number killed.
pub fn sweep() -> usize {
    if !ADOPTING.load(Ordering::SeqCst) {
        return 0;
    }
    let me = std::process::id() as i32;
    let mut killed = 0;
    for _ in 0..MAX_PASSES {
        let own = OWN.lock().unwrap_or_else(|e| e.into_inner());
        let orphans: Vec<i32> = children(me)
            .into_iter()
            .filter(|pid| !own.as_ref().is_some_and(|o| o.contains(pid)))
            .collect();
        drop(own);
        if orphans.is_empty() {
            break;
        }
        for pid in orphans {
            // SAFETY: signalling and waiting for a child of this process
            // (it cannot be reused before it is waited for, here).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            killed += 1;
        }
    }
    killed
}

/// The children of process `parent`: each of its threads lists those it
/// started or adopted in `/proc/PID/task/TID/children` (a few short
/// reads); where the kernel lacks those files, every process's parent is
/// read from `/proc`.
fn children(parent: i32) -> Vec<i32> {
    let listed = std::fs::read_dir(format!("/proc/{parent}/task")).map(|tasks| {
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
            .collect::<Vec<String>>()
    });
    match listed {
        Ok(lists) if !lists.is_empty() => lists
            .iter()
            .flat_map(|l| l.split_whitespace().filter_map(|p| p.parse().ok()))
            .collect(),
        _ => children_by_scan(parent),
    }
}

fn children_by_scan(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| crate::confine::tree::parent(*pid) == Some(parent))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_of_listing_children_agree() {
        let mut kids: Vec<std::process::Child> = (0..3)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("5")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let me = std::process::id() as i32;
        let mut listed = children(me);
        let mut scanned = children_by_scan(me);
        listed.sort();
        scanned.sort();
        for k in &kids {
            assert!(listed.contains(&(k.id() as i32)), "{listed:?}");
        }
        for k in &mut kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        // Other tests' children may come and go between the two reads:
        // only ours are compared.
        let ours = |v: &Vec<i32>| -> Vec<i32> {
            v.iter()
                .copied()
                .filter(|p| kids.iter().any(|k| k.id() as i32 == *p))
                .collect()
        };
        assert_eq!(ours(&listed), ours(&scanned));
    }
}

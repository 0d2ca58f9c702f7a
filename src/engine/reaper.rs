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
//! orch's own children are registered while they are started (the sweep
//! waits for starts under way, so it never sees one unregistered), and
//! left to whoever waits for them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub(crate) use crate::children::start as start_own;

/// Whether this process adopts orphans (only `orch run` does).
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// How long one [`sweep`] goes on at most: a process tree that keeps
/// forking is killed pass after pass, each pass every orphan there is,
/// until none is left (a chain of processes, each starting the next and
/// exiting, comes to orch one level a pass); the bound only stops a sweep
/// that something outside keeps feeding.
const SWEEP_LIMIT: Duration = Duration::from_secs(30);

/// Make this process the one that adopts its descendants' orphans. Returns
/// whether it could.
pub(crate) fn adopt_orphans() -> bool {
    #[cfg(target_os = "linux")]
    {
        let ok = nix::sys::prctl::set_child_subreaper(true).is_ok();
        ADOPTING.store(ok, Ordering::SeqCst);
        ok
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Kill and reap every orphan orch adopted, until none is left; the
/// number killed. orch's own children (see [`crate::children`]) are left
/// alone.
pub(crate) fn sweep() -> usize {
    if !ADOPTING.load(Ordering::SeqCst) {
        return 0;
    }
    // One sweep at a time, from its listing through its last reap: two
    // side by side list the same orphans, and the one that kills second
    // would signal (and reap) whatever took the number the first freed
    // (a new child of orch's own, even).
    static SWEEPING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _alone = SWEEPING.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id() as i32;
    let started = Instant::now();
    let mut killed = 0;
    while started.elapsed() < SWEEP_LIMIT {
        let quiet = crate::children::no_start();
        let own = crate::children::locked();
        let orphans: Vec<i32> = children(me)
            .into_iter()
            // Not orch's own, and not of an attempt still running (its
            // cgroup says so, where attempts have one).
            .filter(|pid| {
                !crate::children::is_own(&own, *pid) && !crate::confine::tree::in_live_attempt(*pid)
            })
            .collect();
        drop(own);
        drop(quiet);
        if orphans.is_empty() {
            break;
        }
        for pid in orphans {
            // A child of this process: its number cannot be reused before
            // it is waited for, here.
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            // Reaped without blocking, within the sweep's time: one stuck
            // in the kernel (an NFS or FUSE wait) holds back every attempt's
            // end no longer than that. Left unreaped, its number stays
            // its own.
            while started.elapsed() < SWEEP_LIMIT {
                match nix::sys::wait::waitpid(pid, Some(nix::sys::wait::WaitPidFlag::WNOHANG)) {
                    Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Err(nix::errno::Errno::EINTR) => {}
                    _ => break,
                }
            }
            killed += 1;
        }
    }
    killed
}

/// The orphans process `parent` adopted, with the children its main
/// thread started: the kernel gives an orphan to the first live thread of
/// its subreaper (`find_new_reaper`), the main thread while the process
/// runs, so its list (`/proc/PID/task/PID/children`, one short read) holds
/// every orphan; the children orch's other threads started are in theirs,
/// and are orch's own anyway. Where the kernel lacks those files, every
/// process's parent is read from `/proc` (all of `parent`'s children).
fn children(parent: i32) -> Vec<i32> {
    match std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")) {
        Ok(list) => list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        Err(_) => children_by_scan(parent),
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

    /// An orphan of a process started on another thread (as `orch run`
    /// starts agents on its blocking threads), while that thread still
    /// runs, is listed by the subreaper's main thread's list, as by the
    /// scan of `/proc`. The subreaper is a Python process, so that no
    /// other test's orphan comes to this one.
    #[test]
    fn an_orphan_is_listed_by_the_main_threads_list() {
        use std::io::BufRead;
        let code = [
            "import ctypes, subprocess, threading, time",
            "ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)",
            "def start():",
            "    script = 'sleep 30 >/dev/null 2>&1 & echo $!'",
            "    out = subprocess.run(['sh', '-c', script], capture_output=True, text=True)",
            "    print(out.stdout.strip(), flush=True)",
            "    time.sleep(30)",
            "threading.Thread(target=start, daemon=True).start()",
            "time.sleep(30)",
        ]
        .join("\n");
        let mut reaper = std::process::Command::new("python3")
            .args(["-c", &code])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let reaper_pid = reaper.id() as i32;
        let mut line = String::new();
        std::io::BufReader::new(reaper.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let orphan: i32 = line.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::confine::tree::parent(orphan) != Some(reaper_pid) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let adopted = crate::confine::tree::parent(orphan) == Some(reaper_pid);
        let listed = children(reaper_pid);
        let scanned = children_by_scan(reaper_pid);
        for pid in [orphan, reaper_pid] {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = reaper.wait();
        assert!(adopted, "{orphan} was not adopted");
        assert_eq!(listed, [orphan]);
        assert_eq!(scanned, [orphan]);
    }
}

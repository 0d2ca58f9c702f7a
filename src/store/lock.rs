//! One `orch run` per state directory: the run lock, a file orch holds an
//! exclusive `flock` on for as long as it runs. It is taken before
//! anything is recorded or any agent starts, so a second orch is refused
//! at once; and it is the truth about liveness: when orch takes it, every
//! run still marked running was left by an orch that is gone, whatever
//! process now has its number.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The lock file, in the state directory.
pub(crate) const LOCK_FILE: &str = "run.lock";

/// The run lock, held until dropped.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    /// The state directory, as `held_here` knows it.
    dir: PathBuf,
}

/// The state directories whose lock this process holds.
static HELD_HERE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A state directory as the lock's bookkeeping names it.
fn key(state_dir: &Path) -> PathBuf {
    std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf())
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let mut held = HELD_HERE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = held.iter().position(|d| *d == self.dir) {
            held.swap_remove(i);
        }
    }
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another orch run ({who}) is using `{}`", dir.display())]
    Held { who: String, dir: PathBuf },
    #[error("cannot open the run lock `{}`: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn open(state_dir: &Path) -> Result<File, LockError> {
    let path = state_dir.join(LOCK_FILE);
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|source| LockError::Open { path, source })
}

fn try_flock(f: &File, how: libc::c_int) -> bool {
    // SAFETY: flock on a descriptor this process owns.
    unsafe { libc::flock(f.as_raw_fd(), how | libc::LOCK_NB) == 0 }
}

impl RunLock {
    /// Take the lock of `state_dir` (which exists), or say who holds it.
    pub fn take(state_dir: &Path) -> Result<RunLock, LockError> {
        use std::io::Read;
        use std::os::unix::fs::FileExt;
        let mut f = open(state_dir)?;
        if !try_flock(&f, libc::LOCK_EX) {
            let mut pid = String::new();
            let _ = f.read_to_string(&mut pid);
            // The first line: a longer old pid's tail may follow it for
            // the moment between the holder's write and its cut.
            let pid: String = pid
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .chars()
                .take(20)
                .collect();
            // Empty only while the holder's first pid is on its way.
            let who = if pid.is_empty() {
                "just starting".to_string()
            } else {
                format!("process {pid}")
            };
            return Err(LockError::Held {
                who,
                dir: state_dir.to_path_buf(),
            });
        }
        // Written over the last holder's, then cut to length: a reader
        // sees one pid or the other, never an empty file.
        let line = format!("{}\n", std::process::id());
        let _ = f.write_all_at(line.as_bytes(), 0);
        let _ = f.set_len(line.len() as u64);
        let dir = key(state_dir);
        HELD_HERE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(dir.clone());
        Ok(RunLock { _file: f, dir })
    }

    /// Whether another orch (not this process) holds the lock of
    /// `state_dir` now: the truth about a run marked running there, which
    /// a recorded pid is not (pid 1 in a container, or a number reused).
    pub(crate) fn held_elsewhere(state_dir: &Path) -> bool {
        let here = HELD_HERE
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key(state_dir));
        !here && !RunLock::is_free(state_dir)
    }

    /// Whether no orch holds the lock of `state_dir` now (so every run
    /// marked running there is one whose orch is gone).
    pub(crate) fn is_free(state_dir: &Path) -> bool {
        // Without creating the file: no file, no orch holding it.
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(state_dir.join(LOCK_FILE));
        match f {
            Ok(f) => try_flock(&f, libc::LOCK_SH),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        assert!(RunLock::is_free(dir.path()));
        let held = RunLock::take(dir.path()).unwrap();
        assert!(!RunLock::is_free(dir.path()));
        let e = RunLock::take(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(&std::process::id().to_string()) && e.contains("another orch run"),
            "{e}"
        );
        drop(held);
        assert!(RunLock::is_free(dir.path()));
        RunLock::take(dir.path()).unwrap();
    }

    /// The pid is written over the last holder's and cut to length, so a
    /// second orch never reads an empty file ("process )", round z6); a
    /// holder that has not written yet is "just starting".
    #[test]
    fn the_holders_pid_is_never_read_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "4194304999\n").unwrap();
        let held = RunLock::take(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(held);
        let held = RunLock::take(dir.path()).unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "").unwrap();
        let e = RunLock::take(dir.path()).unwrap_err().to_string();
        assert!(e.contains("(just starting)"), "{e}");
        drop(held);
    }

    #[test]
    fn a_link_in_place_of_the_lock_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(LOCK_FILE)).unwrap();
        assert!(RunLock::take(dir.path()).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}

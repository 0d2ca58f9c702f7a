//! One attempt's process tree: the process orch started and everything
//! it starts, however deep. Whether a process belongs to it is read from
//! the kernel (its chain of parents up to the attempt's leader), never
//! from anything the process says about itself.
//!
//! A process keeps its place in the chain until its parent dies; then it
//! is adopted by orch (the child subreaper) and belongs to no attempt any
//! more. No process can move itself into another attempt's chain.
//!
//! Where orch can make cgroups (v2, in its own cgroup: as root, or where
//! the service manager delegated it one), each attempt also gets a cgroup
//! of its own, which every process of the tree is in, however deep and
//! whichever its parent: at the end of the attempt `cgroup.kill` takes
//! them all at once (a chain of processes that each start the next and
//! exit, or a daemon's double fork, cannot outrun it), and a process's
//! cgroup says which attempt it belongs to after its parent is gone. No
//! confined process can leave it (the cgroup files are not writable) nor
//! start a child in another (`clone3` looks absent to it:
//! [`super::syscalls::born_elsewhere`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How far up the chain of parents [`ProcessTree::holds`] looks.
const MAX_DEPTH: usize = 4096;

/// An attempt's process tree, known once its leader has started.
#[derive(Debug, Default)]
pub struct ProcessTree {
    leader: OnceLock<i32>,
    /// A pidfd of the leader, opened when it started (orch's child, not
    /// reaped yet): once the leader is gone its number may name another
    /// process, whose children are no part of the tree.
    leader_fd: OnceLock<Option<std::os::fd::OwnedFd>>,
    cgroup: Option<Cgroup>,
}

impl ProcessTree {
    /// A tree tracked by its chain of parents only.
    pub fn new() -> ProcessTree {
        ProcessTree::default()
    }

    /// A tree tracked by a cgroup of its own too, where orch can make one.
    pub(crate) fn tracked() -> ProcessTree {
        ProcessTree {
            leader: OnceLock::new(),
            leader_fd: OnceLock::new(),
            cgroup: Cgroup::new(),
        }
    }

    /// Whether the tree has a cgroup of its own.
    pub(crate) fn has_cgroup(&self) -> bool {
        self.cgroup.is_some()
    }

    /// The folder of the tree's cgroup, if it has one.
    #[cfg(test)]
    pub(crate) fn cgroup_dir(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.dir.as_path())
    }

    /// The attempt's process started as `pid`: orch keeps a pidfd of it
    /// (to tell it from a later process of the same number). It is in the
    /// tree's cgroup already, when the tree has one: it was born there
    /// ([`crate::confine::start`]), so every process it starts is in it
    /// too.
    pub fn started(&self, pid: u32) {
        let _ = self.leader_fd.set(pidfd_open(pid as i32));
        let _ = self.leader.set(pid as i32);
    }

    /// For a process about to start in the tree: a descriptor of the tree
    /// cgroup's folder (close-on-exec), for the process to be born in it
    /// ([`super::launch`]). `None` when the tree has no cgroup; an error
    /// when it has one that cannot be opened (the process must not start
    /// then).
    pub(crate) fn cgroup_for_child(&self) -> Option<std::io::Result<std::os::fd::OwnedFd>> {
        let c = self.cgroup.as_ref()?;
        Some(match &c.folder {
            Some(f) => f.try_clone().map(Into::into),
            None => open_folder(&c.dir).map(Into::into),
        })
    }

    /// Kill every process of the tree's cgroup and wait (at most a few
    /// seconds) until it is empty; false when the tree has no cgroup.
    pub(crate) fn kill_all(&self) -> bool {
        match &self.cgroup {
            Some(c) => {
                c.kill();
                true
            }
            None => false,
        }
    }

    /// The leader, once started.
    pub(crate) fn leader(&self) -> Option<i32> {
        self.leader.get().copied()
    }

    /// Whether process `pid` is the leader or one of its descendants now.
    /// (The caller makes sure `pid` still names the process it asked
    /// about: see [`crate::confine::tree`]'s users.) Not every member of
    /// the tree's cgroup: orch adopts there the pipeline's MCP servers it
    /// starts for the attempt, which are not the agent's (a server that
    /// runs code from the workspace is no way into the agent's tools).
    pub(crate) fn holds(&self, pid: i32) -> bool {
        let Some(leader) = self.leader() else {
            return false;
        };
        let mut p = pid;
        for _ in 0..MAX_DEPTH {
            if p == leader {
                return self.leader_alive();
            }
            if p <= 1 {
                return false;
            }
            match parent(p) {
                Some(next) if next != p => p = next,
                _ => return false,
            }
        }
        false
    }
}

impl ProcessTree {
    /// Whether the leader is still the process orch started (running, or
    /// exited but not reaped): without a pidfd (a kernel before 5.3),
    /// whether its number names a process at all.
    fn leader_alive(&self) -> bool {
        use std::os::fd::AsRawFd;
        match self.leader_fd.get() {
            Some(Some(fd)) => {
                // SAFETY: pidfd_send_signal with signal 0 only checks.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        fd.as_raw_fd(),
                        0,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    ) == 0
                }
            }
            _ => true,
        }
    }
}

/// A pidfd of process `pid`, if the kernel has them.
fn pidfd_open(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open with integer arguments; a descriptor it returns
    // is ours to own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, libc::PIDFD_NONBLOCK) };
    // SAFETY: a non-negative result is a new descriptor no one else owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if let Some(c) = self.cgroup.take() {
            c.kill();
            c.retire();
        }
    }
}

/// Empty attempt cgroups kept for the attempts to come, at most
/// [`SPARE_MAX`]: making a cgroup and removing it again each take the
/// kernel's cgroup lock, shared by the whole machine, and cost more than
/// the rest of an agent's start. Only an empty cgroup that was never
/// killed is kept, and it is checked empty again when taken: no confined
/// process can enter it, but an unconfined one could.
static SPARE: Mutex<Vec<Cgroup>> = Mutex::new(Vec::new());

/// How many empty cgroups [`SPARE`] keeps.
const SPARE_MAX: usize = 64;

/// How long [`Cgroup::kill`] waits for the cgroup to empty.
const EMPTY_WAIT: Duration = Duration::from_secs(5);

/// One attempt's cgroup (v2).
#[derive(Debug)]
struct Cgroup {
    /// Its folder in the cgroup file system.
    dir: PathBuf,
    /// Its path as `/proc/PID/cgroup` shows it (`0::<path>`).
    rel: String,
    /// Its folder, open: each process started in the tree is born in the
    /// cgroup it names.
    folder: Option<std::fs::File>,
    /// Its `cgroup.events`, open: whether it holds a process is one read
    /// (opening a file of the cgroup file system costs more than the rest
    /// of asking).
    events: Option<std::fs::File>,
    /// `cgroup.kill` was written: it serves no other attempt (on Linux
    /// 6.18 a process born in a cgroup killed before is killed at birth).
    killed: std::sync::atomic::AtomicBool,
}

/// The live attempts' cgroups (as `/proc/PID/cgroup` shows them): the
/// sweep leaves their processes alone.
static LIVE: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Whether `pid` is in the cgroup of an attempt that is still running.
pub(crate) fn in_live_attempt(pid: i32) -> bool {
    let Some(at) = cgroup_of(pid) else {
        return false;
    };
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|live| live.contains(&at))
}

/// The folder that holds this orch's attempt cgroups (`orch-<pid>`, made
/// now if it was not yet), where orch can make cgroups: `cgroup.kill` on
/// it kills every process of every attempt, one still starting included.
pub(crate) fn attempts_folder() -> Option<&'static Path> {
    base().map(|(dir, _)| dir.as_path())
}

/// orch's own cgroup folder and its path, once: where attempts' cgroups
/// are made (`orch-<pid>/...` below it); `None` where there is no cgroup
/// v2 hierarchy, `ORCH_CGROUPS=off` says not to use one (to run the
/// fallback), or orch may not make cgroups there.
fn base() -> Option<&'static (PathBuf, String)> {
    static BASE: OnceLock<Option<(PathBuf, String)>> = OnceLock::new();
    BASE.get_or_init(|| {
        if std::env::var_os("ORCH_CGROUPS").is_some_and(|v| v == "off") {
            return None;
        }
        let own = cgroup_of(std::process::id() as i32)?;
        let mount = cgroup2_mount()?;
        let name = format!("orch-{}", std::process::id());
        let parent = mount.join(own.trim_start_matches('/'));
        remove_stale(&parent);
        let dir = parent.join(&name);
        std::fs::create_dir(&dir).ok()?;
        let rel = format!("{}/{name}", own.trim_end_matches('/'));
        Some((dir, rel))
    })
    .as_ref()
}

/// Remove the folders of attempt cgroups an orch killed outright left in
/// `parent` (`orch-<pid>` of an orch that is gone); what is still in them
/// is killed first (their keeper should have).
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("orch-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // Signal 0 only asks whether the process exists.
        if pid <= 0 || nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() {
            continue;
        }
        if let Ok(attempts) = std::fs::read_dir(e.path()) {
            for a in attempts.flatten().filter(|a| a.path().is_dir()) {
                let c = Cgroup {
                    dir: a.path(),
                    rel: String::new(),
                    folder: None,
                    events: None,
                    killed: Default::default(),
                };
                c.kill();
                let _ = std::fs::remove_dir(&c.dir);
            }
        }
        let _ = std::fs::remove_dir(e.path());
    }
}

/// Remove orch's own folder of attempt cgroups (when the run ends; any
/// attempt's still there is killed first).
pub(crate) fn remove_base() {
    if let Some((dir, _)) = base() {
        SPARE.lock().unwrap_or_else(|e| e.into_inner()).clear();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten().filter(|e| e.path().is_dir()) {
                let c = Cgroup {
                    dir: e.path(),
                    rel: String::new(),
                    folder: None,
                    events: None,
                    killed: Default::default(),
                };
                c.kill();
                c.remove();
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}

impl Cgroup {
    /// A spare cgroup, else a new one (`attempt-<n>`: a cgroup serves one
    /// attempt after another, so it is named after none).
    fn new() -> Option<Cgroup> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let (base, base_rel) = base()?;
        loop {
            let Some(c) = SPARE.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                break;
            };
            // Still empty: no confined process can be born in it, but an
            // unconfined one (a `full-access` agent, any root process) can.
            if c.populated() != Some(false) {
                c.kill();
                c.remove();
                continue;
            }
            LIVE.lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(HashSet::new)
                .insert(c.rel.clone());
            return Some(c);
        }
        let leaf = format!("attempt-{}", N.fetch_add(1, Ordering::Relaxed));
        let dir = base.join(&leaf);
        std::fs::create_dir(&dir).ok()?;
        let rel = format!("{base_rel}/{leaf}");
        let folder = open_folder(&dir).ok();
        let events = std::fs::File::open(dir.join("cgroup.events")).ok();
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashSet::new)
            .insert(rel.clone());
        Some(Cgroup {
            dir,
            rel,
            folder,
            events,
            killed: Default::default(),
        })
    }

    /// Whether a process (or a cgroup below) is in it, from its open
    /// `cgroup.events`; `None` when that cannot be read.
    fn populated(&self) -> Option<bool> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 128];
        let n = self.events.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n])
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("populated "))
            .map(|v| v.trim() != "0")
    }

    /// `cgroup.kill` (Linux 5.14), else each process in `cgroup.procs`
    /// killed until none is left; then wait until the cgroup is empty.
    /// Nothing to do when it is empty already (the usual end of an
    /// attempt: its processes went with the agent's process group): no
    /// confined process can enter an empty attempt cgroup (and an
    /// unconfined one is not held by the cgroup anyway).
    fn kill(&self) {
        if self.populated() == Some(false) {
            return;
        }
        self.killed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let killed = std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok();
        let started = Instant::now();
        while started.elapsed() < EMPTY_WAIT {
            match self.populated() {
                Some(false) => return,
                Some(true) if killed => {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                _ => {}
            }
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            if procs.trim().is_empty() {
                return;
            }
            if !killed {
                for pid in procs
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The attempt is over: kept as a spare when it is empty, was never
    /// killed (and there is room), else removed.
    fn retire(self) {
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashSet::new)
            .remove(&self.rel);
        if self.populated() == Some(false)
            && self.folder.is_some()
            && !self.killed.load(std::sync::atomic::Ordering::Relaxed)
        {
            let mut spare = SPARE.lock().unwrap_or_else(|e| e.into_inner());
            if spare.len() < SPARE_MAX {
                spare.push(self);
                return;
            }
        }
        self.remove();
    }

    fn remove(&self) {
        LIVE.lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashSet::new)
            .remove(&self.rel);
        // An empty cgroup is removed as a folder; its processes, if any
        // are left (killed, not yet reaped), keep it until they are gone.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read("/proc/self/mountinfo").ok()?;
    crate::confine::policy::parse_mountinfo_fs(&text, "cgroup2")
}

/// The cgroup (v2) of `pid`: the `0::` line of `/proc/PID/cgroup`.
fn cgroup_of(pid: i32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// The parent of `pid`, from `/proc/PID/stat` (the fourth field, counted
/// after the command name's closing parenthesis: the name may hold spaces
/// and parentheses).
pub(crate) fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parent_of(&stat)
}

/// A cgroup's folder, open for naming it (`O_PATH`).
fn open_folder(dir: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)
}

/// The parent pid in a `/proc/PID/stat` line.
pub(crate) fn parent_of(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_from_stat() {
        assert_eq!(
            parent_of(b"123 (a (b) c) S 45 123 123 0 -1 4194560"),
            Some(45)
        );
        assert_eq!(parent_of(b"9 (\xff) S 7 1"), Some(7));
        assert_eq!(parent_of(b"garbage"), None);
    }

    #[test]
    fn a_tree_holds_its_leaders_descendants_and_nothing_else() {
        // sh (the leader) starts sleep: both are in the tree; this test
        // process, and a sleep started beside it, are not.
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let child: i32 = line.trim().parse().unwrap();
        let mut beside = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let tree = ProcessTree::new();
        assert!(!tree.holds(child), "nothing before the leader starts");
        tree.started(leader.id());
        assert!(tree.holds(leader.id() as i32));
        assert!(tree.holds(child));
        assert!(!tree.holds(beside.id() as i32));
        assert!(!tree.holds(std::process::id() as i32));
        assert!(!tree.holds(1));
        for c in [&mut leader, &mut beside] {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child),
            nix::sys::signal::Signal::SIGKILL,
        );
        // The leader is reaped: its number may be another process's now,
        // and nothing is held by it.
        assert!(!tree.holds(leader.id() as i32));
    }
}

//! The keeper: a small companion process that kills every agent process
//! group orch registered with it when orch dies, even by SIGKILL, which
//! gives orch no chance to stop anything itself.
//!
//! orch writes `+PGID` after starting an agent and `-PGID` once the agent's
//! group is gone, and, once, `+cPATH` for the folder of all its attempts'
//! cgroups, where it can make them; when the pipe closes (orch exited,
//! however), the keeper sends KILL to every group still registered, kills
//! every registered cgroup (`cgroup.kill`: everything in it and beneath,
//! whatever left its group, and an agent whose start orch had not
//! finished), waits (2 s at most) for them to be gone, removes every
//! attempt folder orch registered (`+rPATH`: an attempt's own directory and
//! its servers' folder; orch removes them itself as each attempt ends, and
//! then writes `-rPATH`), and exits. It runs in its own
//! process group and ignores INT, TERM and HUP, so a Ctrl-C meant for orch
//! does not take it down first. (A parent-death signal on each agent would
//! also work, but only for the agent's own process.)

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

use nix::sys::signal::{SigHandler, Signal, killpg, signal};
use nix::unistd::Pid;

/// orch's end of the keeper.
pub(crate) struct Keeper {
    pipe: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
}

impl Keeper {
    /// Start `orch keep-groups` (the hidden subcommand that runs [`serve`]).
    pub(crate) fn start(orch_exe: &Path) -> std::io::Result<Keeper> {
        use std::os::unix::process::CommandExt;
        let mut child = super::reaper::start_own(|| {
            let child = Command::new(orch_exe)
                .arg("keep-groups")
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn();
            let pid = child.as_ref().ok().map(|c| c.id());
            (child, pid)
        })?;
        let pipe = child.stdin.take().expect("piped stdin");
        let keeper = Keeper {
            pipe: Mutex::new(Some(pipe)),
            child: Mutex::new(child),
        };
        // Every attempt's cgroup, before any starts: an agent orch started
        // goes with orch, even one whose start orch had not finished
        // (a cgroup is killed with everything beneath it).
        if let Some(dir) = crate::confine::tree::attempts_folder() {
            keeper.watch_cgroup(dir);
        }
        Ok(keeper)
    }

    fn say(&self, line: String) {
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pipe.as_mut() {
            let _ = p.write_all(line.as_bytes());
        }
    }

    /// An agent's process group to kill if orch dies.
    pub(crate) fn watch(&self, pgid: i32) {
        self.say(format!("+{pgid}\n"));
    }

    /// The group is gone; forget it.
    pub(crate) fn release(&self, pgid: i32) {
        self.say(format!("-{pgid}\n"));
    }

    /// An attempt folder to remove if orch dies (the keeper does it as it
    /// ends, after the kills: one orch removed itself is already gone).
    pub(crate) fn remove_if_orch_dies(&self, path: &Path) {
        if let Some(p) = path.to_str().filter(|p| !p.contains(['\n', '\r'])) {
            self.say(format!("+r{p}\n"));
        }
    }

    /// An attempt folder orch removed itself: forget it.
    pub(crate) fn removed(&self, path: &Path) {
        if let Some(p) = path.to_str().filter(|p| !p.contains(['\n', '\r'])) {
            self.say(format!("-r{p}\n"));
        }
    }

    /// A cgroup (its folder) to kill, with everything beneath it, if orch
    /// dies.
    pub(crate) fn watch_cgroup(&self, dir: &Path) {
        if let Some(d) = dir.to_str().filter(|d| !d.contains('\n')) {
            self.say(format!("+c{d}\n"));
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // Closing the pipe ends the keeper; wait so it does not linger.
        drop(
            self.pipe
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = crate::children::wait(child);
    }
}

/// The keeper's side: read `+PGID` / `-PGID` lines until the pipe closes,
/// then kill every group still registered.
pub(crate) fn serve() {
    for sig in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGPIPE,
    ] {
        // SAFETY: setting a signal to be ignored installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    let mut registered = Registered::default();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        registered.apply(&line);
    }
    let Registered {
        groups,
        cgroups,
        leftovers,
    } = registered;
    for pgid in &groups {
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
    }
    // Only cgroups orch made (`.../orch-<pid>`, and beneath).
    let cgroups: Vec<&Path> = cgroups
        .iter()
        .filter(|d| d.contains("/orch-"))
        .map(Path::new)
        .collect();
    for dir in &cgroups {
        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    }
    if leftovers.is_empty() {
        return;
    }
    // A kill is only queued: wait (2 s at most) until the groups and the
    // cgroups are empty, so nothing writes in the folders being removed.
    let gone = || {
        groups
            .iter()
            .all(|&pg| killpg(Pid::from_raw(pg), None) == Err(nix::errno::Errno::ESRCH))
            && cgroups.iter().all(|d| {
                std::fs::read_to_string(d.join("cgroup.events"))
                    .map_or(true, |e| e.lines().any(|l| l == "populated 0"))
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !gone() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // What the killed processes wrote there goes with them: only folders
    // of the attempts' folder (`remove_dir_all` follows no link out).
    for path in leftovers.iter().map(Path::new).filter(|p| removable(p)) {
        for _ in 0..3 {
            let done = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).is_ok(),
                Ok(_) => std::fs::remove_file(path).is_ok(),
                Err(_) => true,
            };
            if done {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// What orch registered with the keeper, and has not taken back.
#[derive(Debug, Default)]
struct Registered {
    /// Process groups to kill (`+PGID`, `-PGID`).
    groups: BTreeSet<i32>,
    /// Cgroup folders to kill (`+cPATH`, `-cPATH`).
    cgroups: BTreeSet<String>,
    /// Attempt folders to remove (`+rPATH`, `-rPATH`).
    leftovers: BTreeSet<String>,
}

impl Registered {
    /// One line from orch; one it does not know changes nothing.
    fn apply(&mut self, line: &str) {
        let (set, path) = match line.get(..2) {
            Some("+r") => (&mut self.leftovers, true),
            Some("-r") => (&mut self.leftovers, false),
            Some("+c") => (&mut self.cgroups, true),
            Some("-c") => (&mut self.cgroups, false),
            _ => {
                let (op, rest) = line.split_at(line.len().min(1));
                if let Ok(pgid) = rest.trim().parse::<i32>()
                    && pgid > 1
                {
                    match op {
                        "+" => {
                            self.groups.insert(pgid);
                        }
                        "-" => {
                            self.groups.remove(&pgid);
                        }
                        _ => {}
                    }
                }
                return;
            }
        };
        if path {
            set.insert(line[2..].to_string());
        } else {
            set.remove(&line[2..]);
        }
    }
}

/// Whether the keeper may remove `path`: an entry of an attempts' folder
/// (`.../orch/attempts/<name>`), named plainly (no `..`, nothing relative).
fn removable(path: &Path) -> bool {
    use std::path::Component;
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && path.parent().is_some_and(|p| p.ends_with("orch/attempts"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_orch_takes_back_is_forgotten() {
        let mut r = Registered::default();
        for line in [
            "+41",
            "+42",
            "-41",
            "+c/sys/fs/cgroup/orch-7",
            "+r/c/orch/attempts/a",
            "+r/c/orch/attempts/a.servers",
            "+r/c/orch/attempts/b",
            "-r/c/orch/attempts/a",
            "-r/c/orch/attempts/a.servers",
            "-c/sys/fs/cgroup/orch-7",
            "+1",
            "x",
            "",
        ] {
            r.apply(line);
        }
        assert_eq!(r.groups.into_iter().collect::<Vec<_>>(), [42]);
        assert!(r.cgroups.is_empty());
        assert_eq!(
            r.leftovers.into_iter().collect::<Vec<_>>(),
            ["/c/orch/attempts/b"]
        );
    }

    #[test]
    fn only_an_entry_of_an_attempts_folder_is_removed() {
        for (path, ok) in [
            (
                "/home/u/.cache/orch/attempts/fix-claude-0123456789abcdef",
                true,
            ),
            ("/home/u/.cache/orch/attempts/fix-claude-0123.servers", true),
            ("/home/u/.cache/orch/attempts/..", false),
            // (`.` is no step: the same entry)
            ("/home/u/.cache/orch/attempts/./x", true),
            ("/home/u/.cache/orch/attempts/a/../..", false),
            ("/home/u/.cache/orch/attempts", false),
            ("/home/u/.cache/orch/other/x", false),
            ("home/u/.cache/orch/attempts/x", false),
            ("/", false),
        ] {
            assert_eq!(removable(Path::new(path)), ok, "{path}");
        }
    }
}

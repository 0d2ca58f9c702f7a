//! One attempt's process tree: the process orch started and everything
//! it starts, however deep. Whether a process belongs to it is read from
//! the kernel (its chain of parents up to the attempt's leader), never
//! from anything the process says about itself.
//!
//! A process keeps its place in the chain until its parent dies; then it
//! is adopted by orch (the child subreaper) and belongs to no attempt any
//! more. No process can move itself into another attempt's chain.

use std::sync::OnceLock;

/// How far up the chain of parents [`ProcessTree::holds`] looks.
const MAX_DEPTH: usize = 4096;

/// An attempt's process tree, known once its leader has started.
#[derive(Debug, Default)]
pub struct ProcessTree {
    leader: OnceLock<i32>,
}

impl ProcessTree {
    pub fn new() -> ProcessTree {
        ProcessTree::default()
    }

    /// The attempt's process started as `pid`.
    pub fn started(&self, pid: u32) {
        let _ = self.leader.set(pid as i32);
    }

    /// The leader, once started.
    pub fn leader(&self) -> Option<i32> {
        self.leader.get().copied()
    }

    /// Whether process `pid` is the leader or one of its descendants now.
    /// (The caller makes sure `pid` still names the process it asked
    /// about: see [`crate::confine::tree`]'s users.)
    pub fn holds(&self, pid: i32) -> bool {
        let Some(leader) = self.leader() else {
            return false;
        };
        let mut p = pid;
        for _ in 0..MAX_DEPTH {
            if p == leader {
                return true;
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

/// The parent of `pid`, from `/proc/PID/stat` (the fourth field, counted
/// after the command name's closing parenthesis: the name may hold spaces
/// and parentheses).
pub fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    parent_of(&stat)
}

/// The parent pid in a `/proc/PID/stat` line.
pub fn parent_of(stat: &[u8]) -> Option<i32> {
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
        unsafe {
            libc::kill(child, libc::SIGKILL);
        }
    }
}

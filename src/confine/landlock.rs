//! The Linux backend: a [`Policy`] as a Landlock ruleset.
//!
//! The ruleset is built in orch (which is multi-threaded: allocation and
//! path lookups are fine there) and only entered in the child between fork
//! and exec, where [`Prepared::enter`] makes three system calls and nothing
//! else (async-signal-safe): `setsid` (no controlling terminal to inject
//! keystrokes into), `PR_SET_NO_NEW_PRIVS` and `landlock_restrict_self`.
//! Landlock is inherited across fork and exec and cannot be lifted, so the
//! CLI, its shells, interpreters, sub-agents and MCP servers all stay inside.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};

use super::policy::{Entry, Policy, readable_roots};

/// The kernel's Landlock ABI version, or the errno saying why there is none.
pub fn kernel_abi() -> Result<u32, i32> {
    // SAFETY: the documented way to ask for the ABI version: no attributes,
    // size 0, the VERSION flag; it touches no memory.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if v < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(v as u32)
    }
}

/// Why a ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("landlock refused the ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("landlock gave no ruleset descriptor")]
    NoDescriptor,
    #[error("cannot open `{path}` for a rule: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A ruleset ready to be entered by a child process.
#[derive(Debug)]
pub struct Prepared {
    fd: OwnedFd,
}

impl Prepared {
    /// Confine the calling process for good. Called in the child after fork
    /// and before exec: only async-signal-safe calls (no allocation, no
    /// locks). The ruleset's descriptor is closed by exec (it is CLOEXEC).
    pub fn enter(&self) -> io::Result<()> {
        // SAFETY: plain system calls with integer arguments (and a static
        // C string).
        unsafe {
            if libc::getpgrp() != libc::getpid() {
                // A session of its own: no controlling terminal.
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else {
                // Already leading its own group (spawned with
                // `process_group(0)`), it cannot start a session: it gives
                // up the controlling terminal instead, if it has one.
                let tty = libc::open(
                    c"/dev/tty".as_ptr(),
                    libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
                );
                if tty >= 0 {
                    libc::ioctl(tty, libc::TIOCNOTTY);
                    libc::close(tty);
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The entries of a directory with their resolved paths (unreadable or
/// dangling ones left out).
fn list_dir(dir: &Path) -> Vec<Entry> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| {
        let path = e.ok()?.path();
        let resolved = std::fs::canonicalize(&path).ok()?;
        Some(Entry { path, resolved })
    })
    .collect()
}

/// Build the ruleset for `policy` on a kernel speaking Landlock `abi`.
/// Every access right the kernel knows is handled (so nothing is allowed
/// by omission); on ABI 6 and later, signals to and abstract sockets of
/// processes outside the sandbox are refused as well.
pub fn prepare(policy: &Policy, abi: u32) -> Result<Prepared, PrepareError> {
    let abi = ABI::from(abi as i32);
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let device =
        (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev) & all;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)?;
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    let mut rules: Vec<PathBeneath<PathFd>> = Vec::new();
    let mut add = |path: &Path, access: BitFlags<AccessFs>| -> Result<(), PrepareError> {
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            // A folder that does not exist here needs no rule.
            Err(_) if !path.exists() => return Ok(()),
            Err(e) => {
                return Err(PrepareError::Open {
                    path: path.to_path_buf(),
                    source: io::Error::other(e.to_string()),
                });
            }
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        rules.push(PathBeneath::new(fd, access));
        Ok(())
    };
    for root in readable_roots(&policy.hidden, &list_dir) {
        add(&root, read)?;
    }
    for path in &policy.readable {
        add(path, read)?;
    }
    for path in &policy.writable {
        add(path, all)?;
    }
    for path in &policy.devices {
        add(path, device)?;
    }
    let created = ruleset
        .create()?
        .add_rules(rules.into_iter().map(Ok::<_, landlock::RulesetError>))?;
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or(PrepareError::NoDescriptor)?;
    Ok(Prepared { fd })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::{Availability, Confinement, Places};
    use crate::settings::ConfinementMode;
    use crate::toolset::Permission;
    use std::process::Command;

    /// The kernel's ABI; the suite needs Landlock to prove confinement.
    fn abi() -> u32 {
        match Availability::detect(ConfinementMode::Auto) {
            Availability::Available { abi } => abi,
            other => panic!("these tests need Landlock: {}", other.describe()),
        }
    }

    struct Scene {
        _dir: tempfile::TempDir,
        home: PathBuf,
        workspace: PathBuf,
        own: PathBuf,
        elsewhere: PathBuf,
    }

    fn scene() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let workspace = root.join("work");
        let own = home.join(".cache/orch/attempts/a1");
        let elsewhere = root.join("elsewhere");
        for d in [
            &home.join(".ssh"),
            &home.join(".cargo/bin"),
            &workspace,
            &own,
            &elsewhere,
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
        std::fs::write(home.join(".cargo/bin/tool"), "tool").unwrap();
        std::fs::write(workspace.join("src.txt"), "source").unwrap();
        Scene {
            _dir: dir,
            home,
            workspace,
            own,
            elsewhere,
        }
    }

    /// Run `sh -c script` confined at `level`; its exit code.
    fn sh(s: &Scene, level: Permission, script: &str) -> i32 {
        let places = Places {
            workspace: s.workspace.clone(),
            own_dir: s.own.clone(),
            home: Some(s.home.clone()),
            home_readable: vec![s.home.join(".cargo/bin")],
            also_writable: Vec::new(),
        };
        let policy = crate::confine::Policy::for_permission(level, &places, &[]).unwrap();
        let confinement = Confinement { policy, abi: abi() };
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .current_dir(&s.workspace)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        confinement.apply(&mut cmd).unwrap();
        cmd.status().unwrap().code().unwrap_or(-1)
    }

    #[test]
    fn read_only_writes_only_its_own_directory() {
        let s = scene();
        let ws = s.workspace.display();
        let own = s.own.display();
        let out = s.elsewhere.display();
        // Reads work, except the home; the toolchain folder is the exception.
        assert_eq!(
            sh(&s, Permission::ReadOnly, &format!("cat {ws}/src.txt")),
            0
        );
        assert_eq!(
            sh(&s, Permission::ReadOnly, "cat /etc/hostname >/dev/null"),
            0
        );
        assert_ne!(
            sh(
                &s,
                Permission::ReadOnly,
                &format!("cat {}/.ssh/id_ed25519", s.home.display())
            ),
            0
        );
        assert_ne!(
            sh(
                &s,
                Permission::ReadOnly,
                &format!("ls {}", s.home.display())
            ),
            0
        );
        assert_eq!(
            sh(
                &s,
                Permission::ReadOnly,
                &format!("cat {}/.cargo/bin/tool", s.home.display())
            ),
            0
        );
        // Writes: only the own directory and the devices.
        assert_ne!(
            sh(&s, Permission::ReadOnly, &format!("echo x > {ws}/new.txt")),
            0
        );
        assert_ne!(
            sh(&s, Permission::ReadOnly, &format!(": > {ws}/src.txt")),
            0
        );
        assert_ne!(sh(&s, Permission::ReadOnly, &format!("rm {ws}/src.txt")), 0);
        assert_ne!(
            sh(&s, Permission::ReadOnly, &format!("echo x > {out}/new.txt")),
            0
        );
        assert_eq!(
            sh(&s, Permission::ReadOnly, &format!("echo x > {own}/new.txt")),
            0
        );
        assert_eq!(sh(&s, Permission::ReadOnly, "echo x > /dev/null"), 0);
        assert_eq!(
            std::fs::read_to_string(s.workspace.join("src.txt")).unwrap(),
            "source"
        );
        assert!(!s.workspace.join("new.txt").exists());
        // An interpreter is no way around it.
        assert_ne!(
            sh(
                &s,
                Permission::ReadOnly,
                &format!("python3 -c \"open('{ws}/py.txt','w').write('x')\"")
            ),
            0
        );
        assert!(!s.workspace.join("py.txt").exists());
    }

    #[test]
    fn workspace_write_adds_the_workspace_only() {
        let s = scene();
        let ws = s.workspace.display();
        assert_eq!(
            sh(
                &s,
                Permission::WorkspaceWrite,
                &format!("mkdir -p {ws}/a/b && echo x > {ws}/a/b/c && mv {ws}/a/b/c {ws}/d")
            ),
            0
        );
        assert!(s.workspace.join("d").exists());
        assert_ne!(
            sh(
                &s,
                Permission::WorkspaceWrite,
                &format!("echo x > {}/new.txt", s.elsewhere.display())
            ),
            0
        );
        assert_ne!(
            sh(
                &s,
                Permission::WorkspaceWrite,
                &format!("echo x > {}/planted", s.home.display())
            ),
            0
        );
        assert!(!s.home.join("planted").exists());
    }

    #[test]
    fn a_confined_process_has_no_controlling_terminal_and_cannot_signal_out() {
        let s = scene();
        // setsid: /dev/tty has nothing behind it.
        assert_ne!(sh(&s, Permission::ReadOnly, "exec 3>/dev/tty"), 0);
        if abi() >= 6 {
            // Signals to processes outside the sandbox are refused.
            let mut outside = Command::new("sleep").arg("30").spawn().unwrap();
            let code = sh(&s, Permission::ReadOnly, &format!("kill {}", outside.id()));
            let alive = outside.try_wait().unwrap().is_none();
            let _ = outside.kill();
            let _ = outside.wait();
            assert_ne!(code, 0);
            assert!(alive);
        }
    }
}

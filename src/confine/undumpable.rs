//! A CLI's own program, started so that no process of its domain can
//! reach into it.
//!
//! Within one Landlock domain a process may read another's memory,
//! environment and descriptors (`/proc/<pid>/mem`, `environ`, `fd`) as far
//! as the kernel's ptrace check allows: the same user, no capability the
//! other holds and it lacks, and the other *dumpable*. The model's
//! commands run below their CLI's domain through orch's shells (see
//! [`crate::confine::shell`]), but Codex starts them through the login
//! shell of the user's account or one the model names, in its own
//! domain: a command could read Codex's memory or open its descriptors
//! (and, but for its own socket streams, write lines that pass for
//! Codex's). The kernel
//! makes a process undumpable when it executes a file it may not read,
//! so orch starts such a CLI from a copy of its program that its owner
//! may execute but not read (mode `0100`; a confined process gives up its
//! capabilities before it executes, so root reads it no more than anyone).
//! The CLI still reads its own `/proc/self` (a process always may); the
//! commands it starts from readable files are dumpable as usual, and
//! cannot reach it.
//!
//! The copy is made once per program file (its real path, device, inode
//! and size, and whether it comes with its package) in orch's cache, under a lock that every
//! orch making or removing a copy there takes; where the program comes in
//! a package (Codex's npm package: `vendor/<target>/bin/codex` beside
//! `codex-path/rg` and its helpers), beside links to the package's other
//! entries and to the program's neighbours. A copy not used for a day
//! whose program file has changed since (an update) is removed when
//! another copy of the same path is made. Its owner may still `chmod` a
//! copy (Landlock has no rule for it): a copy made readable is put back
//! as an attempt starts, and [`held`] checks, once the CLI runs, that the
//! kernel made it undumpable.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// The copy's mode: its owner may execute it, and no one may read it.
const EXECUTE_ONLY: u32 = 0o100;

/// A copy unused for this long, of an older file of its path, is removed.
const UNUSED_FOR: Duration = Duration::from_secs(24 * 3600);

/// Touched each time a copy is used (its modification time says when).
const USED: &str = ".used";

/// The lock file in the copies' folder.
const LOCK: &str = ".lock";

/// Where the undumpable copy of one program file goes, and how to make it.
#[derive(Debug)]
pub(crate) struct ExecOnlyCopy {
    /// The program's real path.
    source: PathBuf,
    /// The package folder whose entries go beside the copy, if any.
    package: Option<PathBuf>,
    /// The source file as planned: device, inode, size.
    identity: (u64, u64, u64),
    /// The copy's own folder in the cache.
    folder: PathBuf,
    /// The copy itself.
    path: PathBuf,
}

impl ExecOnlyCopy {
    /// Where the copy of `program` goes in `root`, with the entries of
    /// `package` (a folder `program` is in) beside it; `None` if it is
    /// not a file, or not in `package`.
    pub(crate) fn plan(program: &Path, package: Option<&Path>, root: &Path) -> Option<Self> {
        let source = std::fs::canonicalize(program).ok()?;
        let meta = std::fs::metadata(&source).ok()?;
        if !meta.is_file() {
            return None;
        }
        let package = match package {
            Some(p) => Some(std::fs::canonicalize(p).ok()?),
            None => None,
        };
        let name = source.file_name()?;
        // Not its times: anyone who may write the program's folder may
        // `touch` it, and an update replaces the file (a new inode).
        let identity = (meta.dev(), meta.ino(), meta.len());
        // The path and the layout name the copy: the same program started
        // with its package and without has two.
        let mut of_path = source.as_os_str().as_bytes().to_vec();
        if let Some(p) = &package {
            of_path.push(0);
            of_path.extend_from_slice(p.as_os_str().as_bytes());
        }
        let folder = root.join(format!(
            "{}-{}-{}",
            name.to_string_lossy(),
            short_hash(&of_path),
            short_hash(format!("{identity:?}").as_bytes())
        ));
        let path = match &package {
            Some(p) => folder.join(source.strip_prefix(p).ok()?),
            None => folder.join(name),
        };
        Some(Self {
            source,
            package,
            identity,
            folder,
            path,
        })
    }

    /// The program it copies (a real path).
    pub(crate) fn source(&self) -> &Path {
        &self.source
    }

    /// The package whose entries sit beside the copy (a real path): the
    /// CLI must read it.
    pub(crate) fn package(&self) -> Option<&Path> {
        self.package.as_deref()
    }

    /// The copy, to start the program by.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The copy's folder: the CLI must read it (and what its links name).
    pub(crate) fn folder(&self) -> &Path {
        &self.folder
    }

    /// Make the copy, unless it is there, under the copies' lock: built
    /// in a new folder beside it and renamed into place, so a copy is
    /// whole or absent, and made once however many attempts ask at once.
    /// Refused when the copies' folder is not this user's alone or does
    /// not let programs run (`noexec`), or when the program changed since
    /// it was planned.
    pub(crate) fn make(&self) -> std::io::Result<()> {
        let root = self
            .folder
            .parent()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)?;
        // orch's folder and the copies' are this user's alone, and no one
        // else may rename anything on the way to them (another user's
        // `/tmp/orch`, made first, could otherwise swap the copies' folder
        // for one of theirs after the copy is made).
        // A mode an agent changed on them (it may `chmod` any folder of
        // the user's it can name) is put back first.
        if let Some(orch) = root.parent() {
            for folder in [orch, root] {
                restore_folder_mode(folder);
            }
            own_alone(orch)?;
            safe_way_to(orch)?;
        }
        own_alone(root)?;
        let flags = nix::sys::statvfs::statvfs(root).map_err(std::io::Error::from)?;
        if flags
            .flags()
            .contains(nix::sys::statvfs::FsFlags::ST_NOEXEC)
        {
            return Err(std::io::Error::other(format!(
                "`{}` is on a file system mounted `noexec`: set XDG_CACHE_HOME to a folder \
                 programs may run from",
                root.display()
            )));
        }
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(root.join(LOCK))?;
        // One make at a time within orch (its own attempts never wait on
        // the file's lock for each other), then across processes, bounded:
        // a process that may read the lock file (an agent, where the cache
        // is outside the home it cannot read) may hold it.
        static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _ours = MAKING.lock().unwrap_or_else(|e| e.into_inner());
        let _held = lock_within(lock, LOCK_WAIT)?;
        self.restore_modes();
        match self.state() {
            State::Made => {}
            // Only its mode changed (a process of this user may `chmod`
            // any file of its own: an agent that learned the path from its
            // Codex's command line): back, in place, so the kernel's
            // rules on the file still name it.
            State::Readable => {
                std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(EXECUTE_ONLY))?
            }
            // A folder by that name whose copy is not as planned is not
            // used: it goes (no link followed), and the copy is made anew.
            State::Other => self.make_anew(root)?,
        }
        // When it was last used, for `remove_unused`.
        std::fs::write(self.folder.join(USED), "")?;
        self.remove_unused(root);
        Ok(())
    }

    /// The copy's folders and the copy back to their modes, in place, when
    /// they are this user's: the owner of a file may `chmod` it whatever
    /// Landlock says (an agent that learned the path from its Codex's
    /// command line could), and a copy made anew would be a new file that
    /// the kernel's rules orch keeps for the run do not name.
    fn restore_modes(&self) {
        // From the copy's folder down, one real folder of this user's at a
        // time (a link on the way, or another's folder, ends it: nothing
        // outside the copy's folder is changed).
        let Ok(below) = self.path.strip_prefix(&self.folder) else {
            return;
        };
        let mut at = self.folder.clone();
        if !restore_folder_mode(&at) {
            return;
        }
        let mut names = below.components().peekable();
        while let Some(name) = names.next() {
            at.push(name);
            if names.peek().is_some() {
                if !restore_folder_mode(&at) {
                    return;
                }
            } else if let Ok(m) = std::fs::symlink_metadata(&at)
                && m.is_file()
                && m.uid() == nix::unistd::geteuid().as_raw()
                && m.mode() & 0o7777 != EXECUTE_ONLY
            {
                let _ =
                    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(EXECUTE_ONLY));
            }
        }
    }

    /// Remove what stands where the copy goes, and make it.
    fn make_anew(&self, root: &Path) -> std::io::Result<()> {
        {
            match std::fs::symlink_metadata(&self.folder) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&self.folder)?,
                Ok(_) => std::fs::remove_file(&self.folder)?,
                Err(_) => {}
            }
            let making = tempfile::Builder::new()
                .prefix(".making-")
                .tempdir_in(root)?;
            self.fill(making.path())?;
            std::fs::write(making.path().join(USED), "")?;
            std::fs::rename(making.path(), &self.folder)?;
            let _ = making.keep();
        }
        Ok(())
    }

    /// The links and the copy, in `into`.
    fn fill(&self, into: &Path) -> std::io::Result<()> {
        let within = self
            .source
            .parent()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        let name = self
            .source
            .file_name()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        let to_path = into.join(
            self.path
                .strip_prefix(&self.folder)
                .map_err(|_| std::io::ErrorKind::InvalidInput)?,
        );
        if let Some(package) = &self.package {
            // Each folder from the package down to the program's: its
            // other entries as links, the way down as folders.
            let mut from = package.clone();
            let mut to = into.to_path_buf();
            let below = within
                .strip_prefix(package)
                .map_err(|_| std::io::ErrorKind::InvalidInput)?;
            for step in below.components() {
                link_entries(&from, &to, step.as_os_str())?;
                from.push(step);
                to.push(step);
                std::fs::DirBuilder::new().mode(0o700).create(&to)?;
            }
            link_entries(&from, &to, name)?;
        }
        let mut from = std::fs::File::open(&self.source)?;
        let m = from.metadata()?;
        let identity = (m.dev(), m.ino(), m.len());
        if identity != self.identity {
            return Err(std::io::Error::other(format!(
                "`{}` changed since the attempt was planned (an update?): run again",
                self.source.display()
            )));
        }
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o200)
            .open(&to_path)?;
        let copied = std::io::copy(&mut from, &mut to)?;
        if copied != m.len() {
            return Err(std::io::Error::other(format!(
                "copied {copied} of the {} bytes of `{}`",
                m.len(),
                self.source.display()
            )));
        }
        to.sync_all()?;
        drop(to);
        std::fs::set_permissions(&to_path, std::fs::Permissions::from_mode(EXECUTE_ONLY))
    }

    /// Whether the copy is there as planned: a file of this user's, of the
    /// planned size, that no one may read, reached from a folder of this
    /// user's that no one else may write through folders (no link).
    #[cfg(test)]
    fn is_made(&self) -> bool {
        self.state() == State::Made
    }

    fn state(&self) -> State {
        let uid = nix::unistd::geteuid().as_raw();
        let folder_ok = std::fs::symlink_metadata(&self.folder)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && only_we_write(&m));
        // Every folder between it and the copy is one, not a link.
        let mut between = self.path.parent();
        let mut folders_ok = true;
        while let Some(d) = between.filter(|d| *d != self.folder) {
            folders_ok &= std::fs::symlink_metadata(d).is_ok_and(|m| m.is_dir());
            between = d.parent();
        }
        let copy = std::fs::symlink_metadata(&self.path)
            .ok()
            .filter(|m| m.is_file() && m.uid() == uid && m.len() == self.identity.2);
        match copy {
            Some(m) if folder_ok && folders_ok => {
                if m.permissions().mode() & 0o7777 == EXECUTE_ONLY {
                    State::Made
                } else {
                    State::Readable
                }
            }
            _ => State::Other,
        }
    }

    /// Copies of older files of the same path not used for a day (a CLI
    /// updated since), and folders being made that an orch that died left
    /// (under the lock, none is being made by anyone else).
    fn remove_unused(&self, root: &Path) {
        let Some(own) = self.folder.file_name() else {
            return;
        };
        let own = own.to_string_lossy();
        let Some((prefix, _)) = own.rsplit_once('-') else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        let older_than = |path: &Path, age: Duration| {
            std::fs::symlink_metadata(path)
                .and_then(|m| m.modified())
                .is_ok_and(|t| SystemTime::now().duration_since(t).unwrap_or_default() > age)
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let unused_older = name != own
                && name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.len() == 17 && rest.starts_with('-'))
                && older_than(&path.join(USED), UNUSED_FOR);
            // Under the lock no copy is being made: one is abandoned.
            let abandoned = name.starts_with(".making-");
            if (unused_older || abandoned) && entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}

/// Where a copy stands.
#[derive(Debug, PartialEq, Eq)]
enum State {
    /// As planned.
    Made,
    /// As planned, but for its mode.
    Readable,
    /// Absent, or not as planned.
    Other,
}

/// Why this machine cannot make a process undumpable, if it cannot: with
/// `fs.suid_dumpable` at 1 ("debug") the kernel leaves a process started
/// from a file it may not read dumpable (`setting` is the file's text).
pub(crate) fn machine_refuses(setting: &[u8]) -> Option<String> {
    (setting.trim_ascii() == b"1").then(|| {
        "this machine's `fs.suid_dumpable` is 1, under which the kernel leaves a program \
         started from a file it may not read dumpable, so Codex's commands could reach into \
         it; set it to 0 or 2 (`sysctl -w fs.suid_dumpable=0`) to run a confined Codex"
            .to_string()
    })
}

/// [`machine_refuses`] for this machine, as it is set now.
pub(crate) fn machine() -> Option<String> {
    // Unreadable (no /proc): `held` checks the process itself.
    std::fs::read("/proc/sys/fs/suid_dumpable")
        .ok()
        .and_then(|s| machine_refuses(&s))
}

/// Whether the process `pid`, started from an undumpable copy of the
/// program called `name`, is undumpable: the copy may have been made
/// readable between its last check and the start (its owner may `chmod`
/// it), and then the process is not, and must not run. Asked as the
/// process would be by one of its commands: from a thread of no
/// capabilities, reading its environment, which the kernel refuses for an
/// undumpable process; once the process shows the program's name (the
/// kernel settles whether it is dumpable as it executes, just before it
/// takes the name). `Ok` too when it ended first.
pub(crate) fn held(pid: u32, name: &std::ffi::OsStr) -> Result<(), String> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let unsure = |e: std::io::Error| format!("cannot tell whether it started undumpable: {e}");
    // The kernel keeps the first 15 bytes of the name.
    let want = &name.as_bytes()[..name.len().min(15)];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match std::fs::read(proc.join("comm")) {
            Ok(comm) if comm.strip_suffix(b"\n").unwrap_or(&comm) == want => break,
            Ok(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(_) => {
                return Err(format!(
                    "process {pid} never showed the name {name:?} (a wrapper that starts \
                     Codex in its place?)"
                ));
            }
            // It ended already: whatever it was, its commands are over.
            Err(_) if ended(pid) => return Ok(()),
            Err(e) => return Err(unsure(e)),
        }
    }
    let read = std::thread::scope(|s| {
        s.spawn(|| {
            drop_own_capabilities()?;
            match std::fs::File::open(proc.join("environ")) {
                // An exiting process has no memory left to read (and older
                // kernels let anyone open its environment).
                Ok(mut f) => {
                    let mut byte = [0u8; 1];
                    match std::io::Read::read(&mut f, &mut byte) {
                        Ok(0) if ended(pid) => Ok(false),
                        Ok(_) => Ok(true),
                        Err(_) if ended(pid) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(false),
                Err(_) if ended(pid) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the checking thread failed")))
    });
    match read {
        Ok(false) => Ok(()),
        Ok(true) => Err(machine().map_or_else(
            || {
                "it started dumpable: its program's copy could be read when it started (an \
                 agent's `chmod`?), so its commands could reach into it (docs/confinement.md, \
                 \"Codex\")"
                    .to_string()
            },
            |why| format!("it started dumpable: {why}"),
        )),
        Err(e) => Err(unsure(e)),
    }
}

/// Whether process `pid` ended (gone, or a zombie orch has not reaped).
fn ended(pid: u32) -> bool {
    match std::fs::read(format!("/proc/{pid}/stat")) {
        // The state follows the name, which is in parentheses.
        Ok(stat) => stat
            .iter()
            .rposition(|b| *b == b')')
            .and_then(|at| stat.get(at + 2))
            .is_some_and(|state| matches!(state, b'Z' | b'X')),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Give up every capability of the calling thread (of its own sets: the
/// others keep theirs).
fn drop_own_capabilities() -> std::io::Result<()> {
    use super::launch::{CAP_VERSION_3, CapData, CapHeader};
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let none = [CapData::default(); 2];
    // SAFETY: capset with a version-3 header and the two data words that
    // version reads; it changes the calling thread's credentials only.
    if unsafe { libc::syscall(libc::SYS_capset, &header, none.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Put `folder` back to mode 0700 when it is a real folder of this
/// user's with another mode; whether it is such a folder.
fn restore_folder_mode(folder: &Path) -> bool {
    match std::fs::symlink_metadata(folder) {
        Ok(m) if m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() => {
            if m.mode() & 0o7777 != 0o700 {
                let _ = std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700));
            }
            true
        }
        _ => false,
    }
}

/// How long an attempt waits for the copies' lock.
const LOCK_WAIT: Duration = Duration::from_secs(120);

/// `file` locked (exclusively) within `wait`, else an error that says so.
fn lock_within(
    mut file: std::fs::File,
    wait: Duration,
) -> std::io::Result<nix::fcntl::Flock<std::fs::File>> {
    let deadline = std::time::Instant::now() + wait;
    loop {
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(held) => return Ok(held),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if std::time::Instant::now() < deadline => {
                file = f;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "another process held the lock of orch's program copies for {} s",
                        wait.as_secs()
                    ),
                ));
            }
            Err((_, e)) => return Err(e.into()),
        }
    }
}

/// No one but this user and root may rename or remove anything on the
/// way to `folder`, as the kernel walks it: each name is looked up in turn
/// (no link followed), a link is this user's or root's and its target is
/// walked in its place, and each folder is theirs, and sticky (`/tmp`,
/// where no one may rename another's entries) if anyone else may write it.
fn safe_way_to(folder: &Path) -> std::io::Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    let refuse = |at: &Path| {
        std::io::Error::other(format!(
            "`{}`, on the way to orch's cache `{}`, is another user's (a folder or a link) or \
             others may rename what is in it: set XDG_CACHE_HOME to a folder of yours",
            at.display(),
            folder.display()
        ))
    };
    let dir_ok = |m: &std::fs::Metadata| {
        m.is_dir()
            && (m.uid() == uid || m.uid() == 0)
            && (m.mode() & 0o1000 != 0 || only_we_write(m))
    };
    if !std::fs::symlink_metadata("/").is_ok_and(|m| dir_ok(&m)) {
        return Err(refuse(Path::new("/")));
    }
    crate::path_env::walk_links(
        folder,
        |next, m| {
            let m =
                m.map_err(|e| std::io::Error::new(e.kind(), format!("`{}`: {e}", next.display())))?;
            let ok = if m.file_type().is_symlink() {
                m.uid() == uid || m.uid() == 0
            } else {
                dir_ok(m)
            };
            if ok { Ok(()) } else { Err(refuse(next)) }
        },
        refuse,
    )?;
    Ok(())
}

/// Whether no other user may write the folder `m` describes: neither
/// others, nor its group unless that group is this user's alone (a user
/// private group, named as the user and with no other members, which a
/// umask of 002 leaves writable).
fn only_we_write(m: &std::fs::Metadata) -> bool {
    m.mode() & 0o002 == 0 && (m.mode() & 0o020 == 0 || private_group(m.gid()))
}

/// Whether group `gid` is this user's alone.
fn private_group(gid: u32) -> bool {
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .ok()
        .flatten();
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten();
    match (user, group) {
        (Some(u), Some(g)) => {
            g.name == u.name && g.mem.iter().all(|m| *m == u.name) && u.gid.as_raw() == gid
        }
        _ => false,
    }
}

/// `folder` is this user's and no one else may write it.
fn own_alone(folder: &Path) -> std::io::Result<()> {
    let m = std::fs::symlink_metadata(folder)?;
    if m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && only_we_write(&m) {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "`{}` is not a folder of this user's alone (another user's, writable by others, or \
             a link): set XDG_CACHE_HOME to one",
            folder.display()
        )))
    }
}

/// A link in `into` to each entry of `folder` but `except`.
fn link_entries(folder: &Path, into: &Path, except: &std::ffi::OsStr) -> std::io::Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        if entry.file_name() != except {
            std::os::unix::fs::symlink(entry.path(), into.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// 16 hex digits of the SHA-256 of `bytes`.
fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only "debug" (1) leaves a program started from an unreadable file
    /// dumpable; 0 and 2 (and this machine's setting, whatever it is,
    /// when it is one of them) let Codex start.
    #[test]
    fn a_machine_whose_kernel_leaves_it_dumpable_refuses_codex_with_the_reason() {
        let why = machine_refuses(b"1\n").unwrap();
        assert!(
            why.contains("fs.suid_dumpable") && why.contains("=0"),
            "{why}"
        );
        assert_eq!(machine_refuses(b"0\n"), None);
        assert_eq!(machine_refuses(b"2\n"), None);
        if let Ok(here) = std::fs::read("/proc/sys/fs/suid_dumpable") {
            assert_eq!(machine().is_some(), here.trim_ascii() == b"1");
        }
    }

    /// A package laid out as Codex's is: `triple/bin/codex` (a real
    /// program: a copy of `true`) beside a helper, with `codex-path/rg`
    /// one folder up; the program and the package.
    fn install(at: &Path) -> (PathBuf, PathBuf) {
        let package = at.join("triple");
        let bin = package.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(package.join("codex-path")).unwrap();
        std::fs::write(package.join("codex-path").join("rg"), "rg").unwrap();
        std::fs::write(bin.join("helper"), "helper").unwrap();
        let program = bin.join("codex");
        std::fs::copy(which::which("true").unwrap(), &program).unwrap();
        (program, package)
    }

    /// [`install`] in `dir`, and the copy of its program planned in a
    /// cache there: the program, the package, the copies' folder, the plan.
    fn planned(dir: &Path) -> (PathBuf, PathBuf, PathBuf, ExecOnlyCopy) {
        let (program, package) = install(&dir.join("pkg"));
        let root = dir.join("cache");
        let copy = ExecOnlyCopy::plan(&program, Some(&package), &root).unwrap();
        (program, package, root, copy)
    }

    #[test]
    fn the_copy_runs_cannot_be_read_and_sits_beside_links_to_its_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let (program, _, root, copy) = planned(dir.path());
        assert!(copy.path().ends_with("bin/codex"));
        assert!(copy.path().starts_with(copy.folder()));
        copy.make().unwrap();
        let m = std::fs::symlink_metadata(copy.path()).unwrap();
        assert!(m.is_file());
        assert_eq!(m.permissions().mode() & 0o7777, 0o100);
        assert_eq!(m.len(), std::fs::metadata(&program).unwrap().len());
        // It runs.
        let ran = std::process::Command::new(copy.path()).status().unwrap();
        assert!(ran.success());
        assert_eq!(
            std::fs::read_link(copy.folder().join("bin").join("helper")).unwrap(),
            std::fs::canonicalize(program.with_file_name("helper")).unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(copy.folder().join("codex-path").join("rg")).unwrap(),
            "rg"
        );
        // Made once: a second make finds it; nothing is left beside it
        // but the lock.
        copy.make().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], LOCK);
        // A program with no package: the copy alone.
        let alone = ExecOnlyCopy::plan(&program, None, &dir.path().join("alone")).unwrap();
        assert_eq!(alone.path(), alone.folder().join("codex"));
        alone.make().unwrap();
        assert!(
            std::process::Command::new(alone.path())
                .status()
                .unwrap()
                .success()
        );
    }

    #[test]
    fn a_changed_program_gets_a_new_copy_and_an_old_unused_one_goes() {
        let dir = tempfile::tempdir().unwrap();
        let (program, package, root, old) = planned(dir.path());
        old.make().unwrap();
        // Another program's copy stays.
        let (other, other_package) = install(&dir.path().join("other"));
        let other = ExecOnlyCopy::plan(&other, Some(&other_package), &root).unwrap();
        other.make().unwrap();
        std::fs::write(&program, b"\x7fELF updated").unwrap();
        let new = ExecOnlyCopy::plan(&program, Some(&package), &root).unwrap();
        assert_ne!(new.folder(), old.folder());
        // Used a moment ago (a run may still start from it): it stays.
        new.make().unwrap();
        assert!(old.folder().exists(), "a copy in use was removed");
        // Unused for two days: it goes with the next make.
        let two_days_ago = SystemTime::now() - 2 * UNUSED_FOR;
        std::fs::File::options()
            .write(true)
            .open(old.folder().join(USED))
            .unwrap()
            .set_modified(two_days_ago)
            .unwrap();
        new.make().unwrap();
        assert!(!old.folder().exists(), "the unused older copy stays");
        assert!(
            other.folder().exists(),
            "another program's copy was removed"
        );
        assert!(new.is_made());
    }

    #[test]
    fn a_copy_not_as_planned_is_made_again_and_a_changed_program_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (program, package, _, copy) = planned(dir.path());
        copy.make().unwrap();
        // Made readable (an agent's `chmod`): not taken as made, and its
        // mode put back in place (the same file: the kernel's rules on
        // it still name it).
        let inode = std::fs::metadata(copy.path()).unwrap().ino();
        std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
        assert!(!copy.is_made());
        copy.make().unwrap();
        assert!(copy.is_made());
        assert_eq!(std::fs::metadata(copy.path()).unwrap().ino(), inode);
        // Its folder on the way made a link (into a tree an agent may
        // write): not followed, made anew.
        let bin = copy.folder().join("bin");
        let elsewhere = dir.path().join("elsewhere");
        std::fs::rename(&bin, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &bin).unwrap();
        assert!(!copy.is_made());
        copy.make().unwrap();
        assert!(copy.is_made());
        assert!(!std::fs::symlink_metadata(&bin).unwrap().is_symlink());
        // A link where the folder goes is not followed: it goes.
        std::fs::remove_dir_all(copy.folder()).unwrap();
        std::os::unix::fs::symlink(dir.path().join("pkg"), copy.folder()).unwrap();
        copy.make().unwrap();
        assert!(copy.is_made());
        assert!(package.join("bin").join("codex").exists());
        // The program changed after the plan: no copy of the new bytes
        // under the old plan's name.
        std::fs::remove_dir_all(copy.folder()).unwrap();
        std::fs::write(&program, b"\x7fELF another").unwrap();
        let e = copy.make().unwrap_err();
        assert!(e.to_string().contains("changed since"), "{e}");
        assert!(!copy.folder().exists());
    }

    /// A process started from a file it may not read (with no
    /// capability that reads it anyway, as a confined start has none) is
    /// held; one started from a readable file is not (the control).
    #[test]
    fn only_a_process_started_from_an_unreadable_file_is_held() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("sleeper");
        std::fs::copy(which::which("sleep").unwrap(), &program).unwrap();
        for (mode, held_it) in [(0o755, false), (0o100, true)] {
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(mode)).unwrap();
            let mut cmd = std::process::Command::new(&program);
            cmd.arg("5");
            // As a confined start: no capability in the bounding set (else
            // root gets them all back as it executes), none of its own.
            // SAFETY: plain system calls between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    for cap in 0..64 {
                        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                            break;
                        }
                    }
                    drop_own_capabilities()
                });
            }
            let mut child = cmd.spawn().unwrap();
            let said = held(child.id(), std::ffi::OsStr::new("sleeper"));
            child.kill().unwrap();
            child.wait().unwrap();
            assert_eq!(said.is_ok(), held_it, "mode {mode:o}: {said:?}");
        }
    }

    /// What an agent may do to a copy it can name: change its modes. All
    /// are put back on the same files (the kernel's rules name them).
    #[test]
    fn modes_changed_on_the_copy_and_its_folders_are_put_back_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (program, _, root, copy) = planned(dir.path());
        copy.make().unwrap();
        let bin = copy.folder().join("bin");
        let inodes = |c: &ExecOnlyCopy| {
            [c.folder(), bin.as_path(), c.path()].map(|p| std::fs::metadata(p).unwrap().ino())
        };
        let before = inodes(&copy);
        for (path, mode) in [
            (copy.folder(), 0o777),
            (copy.folder(), 0o000),
            (bin.as_path(), 0o000),
            (copy.path(), 0o755),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
            copy.make().unwrap();
            assert!(copy.is_made(), "{path:?} {mode:o}");
            assert_eq!(inodes(&copy), before, "{path:?} {mode:o}: made anew");
        }
        // The same program with its package and alone: two copies.
        let alone = ExecOnlyCopy::plan(&program, None, &root).unwrap();
        assert_ne!(alone.folder(), copy.folder());
    }

    #[test]
    fn a_held_lock_is_waited_for_a_while_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK);
        let open = || std::fs::File::create(&path).unwrap();
        let held = lock_within(open(), Duration::from_millis(10)).unwrap();
        let e = lock_within(open(), Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("held the lock"), "{e}");
        drop(held);
        lock_within(open(), Duration::from_millis(10)).unwrap();
    }

    /// Another user's link on the way to the cache (a home's `.cache`
    /// linked elsewhere) could be pointed at their tree after the check.
    #[test]
    fn another_users_link_on_the_way_to_the_cache_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (program, package) = install(&dir.path().join("pkg"));
        let real = dir.path().join("real");
        std::fs::create_dir_all(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // Ours: fine.
        let copy = ExecOnlyCopy::plan(&program, Some(&package), &link.join("orch/programs"));
        copy.unwrap().make().unwrap();
        // Another user's (as root can make it): refused.
        if nix::unistd::geteuid().is_root() {
            let nobody = nix::unistd::Uid::from_raw(65534);
            nix::unistd::fchownat(
                nix::fcntl::AT_FDCWD,
                &link,
                Some(nobody),
                None,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .unwrap();
            let copy = ExecOnlyCopy::plan(&program, Some(&package), &link.join("orch/programs"));
            let e = copy.unwrap().make().unwrap_err();
            assert!(e.to_string().contains("another user's"), "{e}");
            // Nested: our link names a path through theirs.
            let outer = dir.path().join("outer");
            std::os::unix::fs::symlink(link.join("."), &outer).unwrap();
            let copy = ExecOnlyCopy::plan(&program, Some(&package), &outer.join("orch/programs"));
            let e = copy.unwrap().make().unwrap_err();
            assert!(e.to_string().contains("another user's"), "{e}");
        }
    }

    /// A process that ended before the check (a Codex refusing its flags)
    /// is not taken for a confinement failure: its own error stays the
    /// attempt's.
    #[test]
    fn a_process_that_already_ended_is_held() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        // A zombie (not reaped yet), then gone.
        while !ended(child.id()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(held(child.id(), std::ffi::OsStr::new("true")), Ok(()));
        child.wait().unwrap();
        assert_eq!(held(child.id(), std::ffi::OsStr::new("true")), Ok(()));
    }

    #[test]
    fn a_copies_folder_made_writable_is_put_back_and_another_users_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (program, package) = install(&dir.path().join("pkg"));
        let root = dir.path().join("cache");
        std::fs::create_dir_all(&root).unwrap();
        // Ours, made writable by anyone (an agent's `chmod`): put back.
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let copy = ExecOnlyCopy::plan(&program, Some(&package), &root).unwrap();
        copy.make().unwrap();
        let mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        // Another user's (as root can make it): refused, nothing made.
        if nix::unistd::geteuid().is_root() {
            let other = dir.path().join("other");
            std::fs::create_dir_all(&other).unwrap();
            nix::unistd::chown(&other, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
            let copy = ExecOnlyCopy::plan(&program, Some(&package), &other).unwrap();
            let e = copy.make().unwrap_err();
            assert!(e.to_string().contains("this user's alone"), "{e}");
            assert!(!copy.folder().exists());
        }
    }
}

//! Opening files in trees agents can write, as hostile input: beneath a
//! root, without following any symbolic link on the way or at the end,
//! and only regular files (a FIFO an agent planted would block orch
//! forever; a device would read something else).
//!
//! orch runs unconfined. Every file it opens in the workspace (artifacts,
//! claims, documents, upstream outputs) or writes there (reports it was
//! asked to write) goes through here, so a link an agent planted cannot
//! make orch read `~/.ssh/id_ed25519` into a prompt or write model text
//! into `~/.bashrc`.
//!
//! On Linux 5.6 and later this is `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`; before, each component is
//! opened with `O_NOFOLLOW` from the one before.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// A directory opened once, whose files are opened beneath it.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

/// Why a path beneath a root was refused.
fn refused(rel: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("`{}` {why}", rel.display()),
    )
}

impl Root {
    /// Open the directory `path` (the caller's choice: links in it are
    /// followed, as the user gave it).
    pub(crate) fn open(path: &Path) -> io::Result<Root> {
        let c = cstr(path.as_os_str().as_bytes())?;
        // SAFETY: open with a valid C string; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Root {
            // SAFETY: a fresh descriptor this process owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
        })
    }

    /// A short path that names this folder through its descriptor
    /// (`/proc/self/fd/N`), for calls that take a path (binding a socket:
    /// at most 107 bytes).
    pub(crate) fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Open `rel` beneath the root with `flags` (plus `O_NOFOLLOW` and
    /// `O_CLOEXEC`), refusing `..`, absolute paths and every link.
    fn open_at(&self, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        check_relative(rel)?;
        let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        match openat2(&self.fd, rel, flags, mode) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => walk(&self.fd, rel, flags, mode),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Err(refused(
                rel,
                "goes through a symbolic link: orch does not follow links in the workspace",
            )),
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                Err(refused(rel, "leads out of its folder"))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && flags & libc::O_DIRECTORY != 0 => {
                Err(refused(
                    rel,
                    "is not a folder (a link to one is not followed: orch follows no link there)",
                ))
            }
            other => other,
        }
    }

    /// The folder `rel` beneath the root, opened without following any
    /// link on the way or at the end, as a root of its own: a walk of the
    /// tree lists it ([`Root::entries`]) and opens its files beneath it,
    /// so no link is ever taken, whatever the agent put where.
    pub(crate) fn open_dir(&self, rel: &Path) -> io::Result<Root> {
        let fd = self.open_at(rel, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok(Root {
            fd,
            path: self.path.join(rel),
        })
    }

    /// The entries of the root folder, each a name and its kind as the
    /// folder gives it: a link is a link, never what it points to. (Read
    /// through the folder's descriptor, so a folder renamed or replaced
    /// meanwhile is still the one opened.)
    pub(crate) fn entries(
        &self,
    ) -> io::Result<impl Iterator<Item = io::Result<(std::ffi::OsString, std::fs::FileType)>> + use<>>
    {
        Ok(std::fs::read_dir(self.fd_path())?.map(|e| {
            let e = e?;
            Ok((e.file_name(), e.file_type()?))
        }))
    }

    /// Open the regular file `rel` for reading.
    pub(crate) fn open_file(&self, rel: &Path) -> io::Result<File> {
        let fd = self.open_at(rel, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(refused(rel, "is not a regular file"));
        }
        // Back to blocking reads (a regular file never blocks anyway).
        // SAFETY: fcntl on a descriptor this function owns.
        unsafe {
            let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
        Ok(file)
    }

    /// The bytes of the regular file `rel`, at most `max` of them (a longer
    /// file is an error saying so).
    pub(crate) fn read(&self, rel: &Path, max: u64) -> io::Result<Vec<u8>> {
        let file = self.open_file(rel)?;
        let mut bytes = Vec::new();
        file.take(max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(refused(rel, &format!("is larger than {max} bytes")));
        }
        Ok(bytes)
    }

    /// Create (or truncate) the regular file `rel` for writing, with
    /// `mode` when new; its folder must exist.
    #[cfg(test)]
    pub(crate) fn create(&self, rel: &Path, mode: u32) -> io::Result<File> {
        self.open_write(rel, false, mode)
    }

    /// Open the regular file `rel` for writing, created with `mode` when
    /// new, truncated or (`append`) written at its end; its folder must
    /// exist.
    pub(crate) fn open_write(&self, rel: &Path, append: bool, mode: u32) -> io::Result<File> {
        let how = if append {
            libc::O_APPEND
        } else {
            libc::O_TRUNC
        };
        let fd = self.open_at(
            rel,
            libc::O_WRONLY | libc::O_CREAT | how | libc::O_NONBLOCK,
            mode,
        )?;
        let file = File::from(fd);
        if !file.metadata()?.file_type().is_file() {
            return Err(refused(rel, "is not a regular file"));
        }
        Ok(file)
    }

    /// Replace the regular file `rel` with `bytes` at once (a reader sees
    /// the old file or the new one, never half), its folders made as
    /// needed: all beneath the root, no link followed; `mode` for the file.
    pub(crate) fn write_atomic(&self, rel: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
        use std::io::Write;
        check_relative(rel)?;
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Err(refused(rel, "names no file"));
        };
        let folder = if parent.as_os_str().is_empty() {
            Root {
                fd: self.fd.try_clone()?,
                path: self.path.clone(),
            }
        } else {
            self.create_dir_all(parent, 0o700)?;
            Root {
                fd: self.open_at(parent, libc::O_PATH | libc::O_DIRECTORY, 0)?,
                path: self.path.join(parent),
            }
        };
        let tmp_name = format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id());
        let tmp = Path::new(&tmp_name);
        let fd = folder.open_at(tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode);
        let fd = match fd {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A leftover of an earlier try of this process.
                let c = cstr(tmp.as_os_str().as_bytes())?;
                // SAFETY: unlinkat with our descriptor and a valid C string.
                unsafe { libc::unlinkat(folder.fd.as_raw_fd(), c.as_ptr(), 0) };
                folder.open_at(tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)?
            }
            other => other?,
        };
        File::from(fd).write_all(bytes)?;
        let from = cstr(tmp.as_os_str().as_bytes())?;
        let to = cstr(name.as_bytes())?;
        // SAFETY: renameat within one folder we hold, valid C strings. A
        // link at `name` is replaced, not followed.
        let r = unsafe {
            libc::renameat(
                folder.fd.as_raw_fd(),
                from.as_ptr(),
                folder.fd.as_raw_fd(),
                to.as_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Make the folders of `rel` (which names a folder) beneath the root,
    /// each with `mode` when new; an existing link on the way is refused.
    pub(crate) fn create_dir_all(&self, rel: &Path, mode: u32) -> io::Result<()> {
        check_relative(rel)?;
        let mut so_far = PathBuf::new();
        for c in rel.components() {
            so_far.push(c);
            let name = cstr(so_far.as_os_str().as_bytes())?;
            // A new folder is made where the name is free (mkdirat does not
            // follow a link at the end); an existing one is checked by
            // opening it beneath the root.
            // SAFETY: mkdirat with a valid C string relative to our fd.
            let made = unsafe { libc::mkdirat(self.fd.as_raw_fd(), name.as_ptr(), mode) } == 0;
            if !made {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EEXIST) {
                    return Err(err);
                }
            }
            self.open_at(&so_far, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        }
        Ok(())
    }
}

/// Open `rel` beneath the folder `root` and read it whole (at most `max`
/// bytes): [`Root::open`] then [`Root::read`].
pub(crate) fn read(root: &Path, rel: &Path, max: u64) -> io::Result<Vec<u8>> {
    Root::open(root)?.read(rel, max)
}

/// Write (or with `append`, add) `bytes` to the file at `path`, a path the
/// user gave (a report orch was asked to write). One inside `workspace`
/// (lexically, relative to the current folder) is opened beneath it
/// without following any link, since agents may have shaped the tree;
/// elsewhere only its last component must not be a link.
pub(crate) fn write_report(
    path: &Path,
    workspace: &Path,
    bytes: &[u8],
    append: bool,
) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let cwd = std::env::current_dir()?;
    let abs = cwd.join(path);
    let ws = cwd.join(workspace);
    let real_ws = std::fs::canonicalize(&ws).unwrap_or(ws.clone());
    let inside = relative_to(&ws, &abs)
        .map(|r| (ws.clone(), r.to_path_buf()))
        .or_else(|| relative_to(&real_ws, &abs).map(|r| (real_ws.clone(), r.to_path_buf())));
    let mut file = match inside {
        Some((root, rel)) => Root::open(&root)?.open_write(&rel, append, 0o644)?,
        None => {
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).mode(0o644);
            if append {
                o.append(true);
            } else {
                o.truncate(true);
            }
            o.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(&abs)?
        }
    };
    if !file.metadata()?.file_type().is_file() {
        return Err(refused(path, "is not a regular file"));
    }
    file.write_all(bytes)
}

/// `rel` relative to `root` when it is inside it lexically (no `..`), for
/// callers that hold a full path.
pub(crate) fn relative_to<'a>(root: &Path, full: &'a Path) -> Option<&'a Path> {
    full.strip_prefix(root)
        .ok()
        .filter(|r| r.components().all(|c| matches!(c, Component::Normal(_))))
}

fn check_relative(rel: &Path) -> io::Result<()> {
    if rel.as_os_str().is_empty() {
        return Err(refused(rel, "is empty"));
    }
    if !rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(refused(
            rel,
            "is not a plain relative path (no `/` at the start, no `..`)",
        ));
    }
    Ok(())
}

fn cstr(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

fn openat2(dir: &OwnedFd, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstr(rel.as_os_str().as_bytes())?;
    let how = OpenHow {
        flags: flags as u64,
        mode: if flags & libc::O_CREAT != 0 {
            u64::from(mode)
        } else {
            0
        },
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 with a valid descriptor, C string and open_how of
    // the size passed.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The same without `openat2`: each folder on the way opened with
/// `O_NOFOLLOW` from the one before, then the last component.
fn walk(dir: &OwnedFd, rel: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let parts: Vec<&std::ffi::OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some((last, folders)) = parts.split_last() else {
        return Err(refused(rel, "is empty"));
    };
    let mut held: Option<OwnedFd> = None;
    for name in folders {
        let c = cstr(name.as_bytes())?;
        let at = held.as_ref().unwrap_or(dir).as_raw_fd();
        // SAFETY: openat with a valid descriptor and C string.
        let fd = unsafe {
            libc::openat(
                at,
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => refused(
                    rel,
                    "goes through a symbolic link: orch does not follow links in the workspace",
                ),
                _ => e,
            });
        }
        // SAFETY: a fresh descriptor this process owns.
        held = Some(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let c = cstr(last.as_bytes())?;
    let at = held.as_ref().unwrap_or(dir).as_raw_fd();
    // SAFETY: openat with a valid descriptor and C string.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ELOOP) => refused(
                rel,
                "is a symbolic link: orch does not follow links in the workspace",
            ),
            _ => e,
        });
    }
    // SAFETY: a fresh descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scene() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(ws.join("d")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws.join("d/plan.md"), "# plan").unwrap();
        std::fs::write(outside.join("id_ed25519"), "secret").unwrap();
        symlink(outside.join("id_ed25519"), ws.join("key.md")).unwrap();
        symlink(&outside, ws.join("out")).unwrap();
        symlink("d/plan.md", ws.join("inside-link.md")).unwrap();
        (dir, ws, outside)
    }

    #[test]
    fn reads_regular_files_beneath_and_no_link_at_all() {
        let (_d, ws, _out) = scene();
        let root = Root::open(&ws).unwrap();
        assert_eq!(root.read(Path::new("d/plan.md"), 100).unwrap(), b"# plan");
        for bad in ["key.md", "out/id_ed25519", "inside-link.md"] {
            let e = root.read(Path::new(bad), 100).unwrap_err();
            assert!(e.to_string().contains("link"), "{bad}: {e}");
        }
        for bad in ["../outside/id_ed25519", "/etc/passwd", ""] {
            assert!(root.read(Path::new(bad), 100).is_err(), "{bad}");
        }
        assert!(root.read(Path::new("d"), 100).is_err(), "a folder");
        let e = root.read(Path::new("d/plan.md"), 3).unwrap_err();
        assert!(e.to_string().contains("larger"), "{e}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (_d, ws, _out) = scene();
        let fifo = CString::new(ws.join("pipe.md").as_os_str().as_bytes()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = read(&ws, Path::new("pipe.md"), 100).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn writes_never_through_a_link() {
        let (_d, ws, out) = scene();
        let root = Root::open(&ws).unwrap();
        // A planted link where orch writes: refused, the target untouched.
        assert!(root.create(Path::new("key.md"), 0o600).is_err());
        assert!(root.create(Path::new("out/new.txt"), 0o600).is_err());
        assert_eq!(std::fs::read(out.join("id_ed25519")).unwrap(), b"secret");
        assert!(!out.join("new.txt").exists());
        // Folders are made beneath, never through a link.
        root.create_dir_all(Path::new("reports/x"), 0o700).unwrap();
        std::io::Write::write_all(
            &mut root.create(Path::new("reports/x/r.md"), 0o600).unwrap(),
            b"ok",
        )
        .unwrap();
        assert_eq!(std::fs::read(ws.join("reports/x/r.md")).unwrap(), b"ok");
        assert!(root.create_dir_all(Path::new("out/deeper"), 0o700).is_err());
        assert!(!out.join("deeper").exists());
    }

    #[test]
    fn a_report_is_never_written_through_a_link_in_the_workspace() {
        let (_d, ws, out) = scene();
        // `out` is a link the agent planted: the report is refused.
        let e = write_report(&ws.join("out/junit.xml"), &ws, b"x", false).unwrap_err();
        assert!(e.to_string().contains("link"), "{e}");
        assert!(!out.join("junit.xml").exists());
        // So is one whose last component is a link, inside or outside.
        assert!(write_report(&ws.join("key.md"), &ws, b"x", true).is_err());
        assert_eq!(std::fs::read(out.join("id_ed25519")).unwrap(), b"secret");
        // A plain file is written, and appended to.
        write_report(&ws.join("d/r.xml"), &ws, b"a", false).unwrap();
        write_report(&ws.join("d/r.xml"), &ws, b"b", true).unwrap();
        assert_eq!(std::fs::read(ws.join("d/r.xml")).unwrap(), b"ab");
        // Outside the workspace the user's folders are followed, the file
        // itself never.
        let elsewhere = out.join("summary.md");
        write_report(&elsewhere, &ws, b"s", true).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("l.md")).unwrap();
        assert!(write_report(&out.join("l.md"), &ws, b"t", true).is_err());
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"s");
    }

    #[test]
    fn an_atomic_write_replaces_a_link_and_never_goes_through_one() {
        let (_d, ws, out) = scene();
        let root = Root::open(&ws).unwrap();
        root.write_atomic(Path::new("m/project/a.md"), b"one", 0o600)
            .unwrap();
        root.write_atomic(Path::new("m/project/a.md"), b"two", 0o600)
            .unwrap();
        assert_eq!(std::fs::read(ws.join("m/project/a.md")).unwrap(), b"two");
        // A link where the file goes is replaced by the file.
        root.write_atomic(Path::new("key.md"), b"mine", 0o600)
            .unwrap();
        assert_eq!(std::fs::read(out.join("id_ed25519")).unwrap(), b"secret");
        assert_eq!(std::fs::read(ws.join("key.md")).unwrap(), b"mine");
        // A link on the way is refused.
        assert!(
            root.write_atomic(Path::new("out/x.md"), b"x", 0o600)
                .is_err()
        );
        assert!(!out.join("x.md").exists());
    }

    #[test]
    fn folders_are_listed_and_entered_without_following_links() {
        let (_d, ws, _out) = scene();
        let root = Root::open(&ws).unwrap();
        let mut seen: Vec<(String, bool, bool)> = root
            .entries()
            .unwrap()
            .map(|e| {
                let (name, kind) = e.unwrap();
                (
                    name.to_string_lossy().into_owned(),
                    kind.is_dir(),
                    kind.is_symlink(),
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                ("d".to_string(), true, false),
                ("inside-link.md".to_string(), false, true),
                ("key.md".to_string(), false, true),
                ("out".to_string(), false, true),
            ]
        );
        let d = root.open_dir(Path::new("d")).unwrap();
        assert_eq!(d.read(Path::new("plan.md"), 100).unwrap(), b"# plan");
        let e = root.open_dir(Path::new("out")).unwrap_err();
        assert!(e.to_string().contains("link"), "{e}");
    }

    #[test]
    fn the_walk_without_openat2_refuses_the_same() {
        let (_d, ws, _out) = scene();
        let root = Root::open(&ws).unwrap();
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        assert!(walk(&root.fd, Path::new("d/plan.md"), flags, 0).is_ok());
        for bad in ["key.md", "out/id_ed25519", "inside-link.md"] {
            assert!(walk(&root.fd, Path::new(bad), flags, 0).is_err(), "{bad}");
        }
    }
}

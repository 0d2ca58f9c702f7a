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
//! domain: a command could read the model's key in Codex's environment,
//! or write into its memory and have it print what it likes. The kernel
//! makes a process undumpable when it executes a file it may not read,
//! so orch starts such a CLI from a copy of its program that its owner
//! may execute but not read (mode `0100`; a confined process holds no
//! capability that would read it anyway). The CLI still reads its own
//! `/proc/self` (a process always may); the commands it starts from
//! readable files are dumpable as usual, and cannot reach it.
//!
//! The copy is made once per program file (its real path, device, inode,
//! size and modification time) in orch's cache, beside links to every
//! other entry of the original's folder and of the folder above (Codex
//! finds its ripgrep and helpers there). Making a copy removes the
//! copies of older files of the same path.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The copy's mode: its owner may execute it, and no one may read it.
const EXECUTE_ONLY: u32 = 0o100;

/// Where the undumpable copy of one program file goes, and how to make it.
#[derive(Debug)]
pub(crate) struct Copy {
    /// The program's real path.
    source: PathBuf,
    /// Its size, as planned.
    size: u64,
    /// The copy's own folder in the cache.
    folder: PathBuf,
    /// The copy itself: `<folder>/<the original's folder name>/<name>`.
    path: PathBuf,
}

impl Copy {
    /// Where the copy of `program` (which must be a file) goes in `root`;
    /// `None` if it cannot be read as one.
    pub(crate) fn plan(program: &Path, root: &Path) -> Option<Self> {
        let source = std::fs::canonicalize(program).ok()?;
        let meta = std::fs::metadata(&source).ok()?;
        if !meta.is_file() {
            return None;
        }
        let name = source.file_name()?;
        let within = source.parent()?.file_name()?;
        let identity = format!(
            "{}:{}:{}:{}.{}",
            meta.dev(),
            meta.ino(),
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        let folder = root.join(format!(
            "{}-{}-{}",
            name.to_string_lossy(),
            short_hash(source.as_os_str().as_bytes()),
            short_hash(identity.as_bytes())
        ));
        let path = folder.join(within).join(name);
        Some(Self {
            source,
            size: meta.len(),
            folder,
            path,
        })
    }

    /// The program it copies (a real path).
    pub(crate) fn source(&self) -> &Path {
        &self.source
    }

    /// The copy, to start the program by.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The copy's folder: the CLI must read it (and what its links name).
    pub(crate) fn folder(&self) -> &Path {
        &self.folder
    }

    /// Make the copy, unless it is there: built in a new folder beside it
    /// and renamed into place, so a copy is whole or absent (another run
    /// making the same one at once is fine).
    pub(crate) fn make(&self) -> std::io::Result<()> {
        if self.is_made() {
            return Ok(());
        }
        // A folder by that name whose copy is not as planned (readable,
        // another size) is not used: it goes, and the copy is made anew.
        match std::fs::symlink_metadata(&self.folder) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&self.folder)?,
            Ok(_) => std::fs::remove_file(&self.folder)?,
            Err(_) => {}
        }
        let root = self
            .folder
            .parent()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)?;
        let making = tempfile::Builder::new()
            .prefix(".making-")
            .tempdir_in(root)?;
        self.fill(making.path())?;
        match std::fs::rename(making.path(), &self.folder) {
            Ok(()) => {
                let _ = making.keep();
            }
            // Made by another run meanwhile.
            Err(_) if self.is_made() => {}
            Err(e) => return Err(e),
        }
        self.remove_older();
        Ok(())
    }

    /// The links and the copy, in `into`.
    fn fill(&self, into: &Path) -> std::io::Result<()> {
        let within = self
            .source
            .parent()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        let within_name = within.file_name().ok_or(std::io::ErrorKind::InvalidInput)?;
        let name = self
            .source
            .file_name()
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        if let Some(above) = within.parent() {
            link_entries(above, into, within_name)?;
        }
        let into = into.join(within_name);
        std::fs::DirBuilder::new().mode(0o700).create(&into)?;
        link_entries(within, &into, name)?;
        let mut from = std::fs::File::open(&self.source)?;
        let to_path = into.join(name);
        let mut to = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o200)
            .open(&to_path)?;
        std::io::copy(&mut from, &mut to)?;
        drop(to);
        std::fs::set_permissions(&to_path, std::fs::Permissions::from_mode(EXECUTE_ONLY))
    }

    /// Whether the copy is there: a file (not a link) of the planned size
    /// that no one may read.
    fn is_made(&self) -> bool {
        std::fs::symlink_metadata(&self.path).is_ok_and(|m| {
            m.is_file() && m.len() == self.size && m.permissions().mode() & 0o7777 == EXECUTE_ONLY
        })
    }

    /// Copies made for older files of the same path (a CLI updated since).
    /// A run still starting from one fails to start; one started runs on.
    fn remove_older(&self) {
        let (Some(root), Some(own)) = (self.folder.parent(), self.folder.file_name()) else {
            return;
        };
        let own = own.to_string_lossy();
        let Some((prefix, _)) = own.rsplit_once('-') else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name != own
                && name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.len() == 17 && rest.starts_with('-'))
                && entry.file_type().is_ok_and(|t| t.is_dir())
            {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
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

    /// A package laid out as Codex's is: `vendor/<triple>/bin/codex`
    /// beside a helper, with `codex-path/rg` one folder up.
    fn package(at: &Path) -> PathBuf {
        let bin = at.join("triple").join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(at.join("triple").join("codex-path")).unwrap();
        std::fs::write(at.join("triple").join("codex-path").join("rg"), "rg").unwrap();
        std::fs::write(bin.join("helper"), "helper").unwrap();
        let program = bin.join("codex");
        std::fs::write(&program, "#!/bin/sh\necho codex\n").unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    #[test]
    fn the_copy_may_be_executed_not_read_and_sits_beside_links_to_its_neighbours() {
        let dir = tempfile::tempdir().unwrap();
        let program = package(&dir.path().join("pkg"));
        let root = dir.path().join("cache");
        let copy = Copy::plan(&program, &root).unwrap();
        assert!(copy.path().starts_with(copy.folder()));
        assert!(copy.path().ends_with("bin/codex"));
        copy.make().unwrap();
        let m = std::fs::symlink_metadata(copy.path()).unwrap();
        assert!(m.is_file());
        assert_eq!(m.permissions().mode() & 0o7777, 0o100);
        assert_eq!(m.len(), std::fs::metadata(&program).unwrap().len());
        let helper = copy.folder().join("bin").join("helper");
        assert_eq!(
            std::fs::read_link(&helper).unwrap(),
            program.with_file_name("helper")
        );
        assert_eq!(
            std::fs::read_to_string(copy.folder().join("codex-path").join("rg")).unwrap(),
            "rg"
        );
        // Made once: a second make finds it.
        copy.make().unwrap();
        let entries = std::fs::read_dir(&root).unwrap().count();
        assert_eq!(entries, 1, "no leftover folder");
    }

    #[test]
    fn a_changed_program_gets_a_new_copy_and_the_old_one_goes() {
        let dir = tempfile::tempdir().unwrap();
        let program = package(&dir.path().join("pkg"));
        let root = dir.path().join("cache");
        let old = Copy::plan(&program, &root).unwrap();
        old.make().unwrap();
        // Another program's copy stays.
        let other = package(&dir.path().join("other"));
        let other = Copy::plan(&other, &root).unwrap();
        other.make().unwrap();
        std::fs::write(&program, "#!/bin/sh\necho codex, updated\n").unwrap();
        let new = Copy::plan(&program, &root).unwrap();
        assert_ne!(new.folder(), old.folder());
        new.make().unwrap();
        assert!(!old.folder().exists(), "the older copy was removed");
        assert!(other.folder().exists(), "another program's copy stays");
        assert!(new.is_made());
    }

    #[test]
    fn a_copy_not_as_planned_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let program = package(&dir.path().join("pkg"));
        let root = dir.path().join("cache");
        let copy = Copy::plan(&program, &root).unwrap();
        copy.make().unwrap();
        // Readable after all: not taken as made, and made again. (Only
        // orch writes the cache; this stands for a copy another version of
        // orch left.)
        std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
        assert!(!copy.is_made());
        copy.make().unwrap();
        assert!(copy.is_made());
        // A link where the folder goes is not followed: it goes.
        std::fs::remove_dir_all(copy.folder()).unwrap();
        std::os::unix::fs::symlink(dir.path().join("pkg"), copy.folder()).unwrap();
        copy.make().unwrap();
        assert!(copy.is_made());
        assert!(dir.path().join("pkg").join("triple").exists());
    }
}
